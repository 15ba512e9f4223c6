"""Helpers of the admin API tests: a live gateway over the tiny random Llama (fast; its
output never matters here) and the real embedder, with an admin token; an admin
HTTP client; semantic entries seeded through the real cache.

The tiny Llama has no chat template, so a chat request that reaches the engine
answers 400; chat requests here are only semantic hits. Requests that must reach
the engine use ``/v1/completions`` (its word-level vocabulary is ``t3 … t127``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from gateway.app import Components
from gateway.policy import TenantPolicy
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from protocol.responses import Kind, response_body, usage
from semantic.embedder_base import CoveringEmbedder
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway

ADMIN_TOKEN = "admin-token-for-tests-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
BLOCK = 16

CAPITAL = "What is the capital of France?"
CAPITAL_PARAPHRASE = "What's the capital city of France?"  # cosine 0.957 with CAPITAL
SEND_100 = "Can I send 100 euros to Spain?"
SEND_900 = "Can I send 900 euros to Spain?"  # 0.93: the amount differs


def tiny_engine(loaded: LoadedModel, num_blocks: int = 96) -> PrefixEngine:
    return PrefixEngine(EngineConfig(block_size=BLOCK, num_blocks=num_blocks), loaded=loaded)


@contextmanager
def admin_gateway(
    data_dir: Path,
    loaded: LoadedModel,
    embedder: CoveringEmbedder,
    admin_token: str | None = ADMIN_TOKEN,
) -> Iterator[Gateway]:
    settings = gateway_settings(data_dir, admin_token=admin_token)
    parts = Components(engine=tiny_engine(loaded), embedder=embedder)
    with running_gateway(settings, parts) as gw:
        yield gw


def admin(gw: Gateway, token: str | None = ADMIN_TOKEN, **headers: str) -> httpx.Client:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=f"{gw.url}/admin", headers=auth | headers, timeout=60)


def new_tenant(client: httpx.Client, tenant_id: str, policy: dict[str, Any] | None = None) -> str:
    """Create a tenant through the admin API; returns a fresh raw API key."""
    body: dict[str, Any] = {"id": tenant_id}
    if policy is not None:
        body["policy"] = policy
    r = client.post("/tenants", json=body)
    assert r.status_code == 201, r.text
    r = client.post(f"/tenants/{tenant_id}/keys", json={"name": "test"})
    assert r.status_code == 201, r.text
    return str(r.json()["key"])


def chat(model: str, question: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "Answer in one short sentence."},
            {"role": "user", "content": question},
        ],
        "max_tokens": 16,
        "temperature": 0,
    } | extra


def completion(model: str, prompt: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "prompt": prompt, "max_tokens": 2, "temperature": 0} | extra


def seed(
    gw: Gateway,
    tenant_id: str,
    body: dict[str, Any],
    answer: str = "Paris.",
    namespace: str | None = None,
) -> int:
    """Store ``answer`` for ``body`` in the tenant's partition (as a backfill would;
    ``namespace``: the one it would have used, default the tenant's now); returns the
    entry id."""
    chat_kind = "messages" in body
    query = gw.query(tenant_id, body, namespace)
    kind: Kind = "chat" if chat_kind else "completion"
    response = response_body(kind, "seed-1", body["model"], answer, "stop", usage(12, 3, 0))
    policy = TenantPolicy().semantic_policy()
    result = gw.cache.store(query, response, policy)
    assert result.stored and result.entry_id is not None, result
    return result.entry_id
