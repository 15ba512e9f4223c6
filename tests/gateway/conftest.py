"""Shared parts of the gateway tests: a live gateway over real pieces (uvicorn on a
free port, SQLite or PostgreSQL, the real embedder, the real SmolLM2 engine or
an HTTP upstream), tenants made through the real admin service, and small
helpers that read OpenAI errors, SSE streams and Prometheus text.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.admin.policies import PolicyAdmin
from gateway.admin.service import TenantAdmin
from gateway.app import Components, create_app
from gateway.policy import TenantPolicy
from gateway.settings import Settings
from gateway.state import GatewayState
from gateway.tenants import TenantStore
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from semantic import Embedder, SemanticCache, SemanticQuery
from tests.live_server import serving

PG_SERVER_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"

#: Short answers from SmolLM2 at temperature 0 (they end with "stop" well inside
#: max_tokens, so they are backfilled).
SHORT_SYSTEM = "Answer in one short sentence."
MAX_TOKENS = 96

#: A long shared system prompt: several full 16-token KV blocks before the question.
LONG_SYSTEM = (
    "You are the support assistant of Northwind Bank. Answer in one or two short sentences, "
    "politely and precisely. Never ask for passwords or full card numbers. Transfers between "
    "Northwind accounts are instant; transfers to other banks take one business day; "
    "international transfers in euros take up to three business days and cost 5 EUR. "
    "Card disputes must be raised within 60 days of the transaction date."
)
BLOCK_SIZE = 16


def smol_engine(loaded: LoadedModel, num_blocks: int = 160) -> PrefixEngine:
    """A fresh paged-KV engine over the session's SmolLM2 (its own, cold block pool)."""
    return PrefixEngine(EngineConfig(block_size=BLOCK_SIZE, num_blocks=num_blocks), loaded=loaded)


def gateway_settings(data_dir: Path, database_url: str | None = None, **extra: Any) -> Settings:
    """Settings passed explicitly: no environment, no .env, no development tenant."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "database_url": database_url or f"sqlite:///{data_dir / 'gateway.db'}",
        "dev_tenant": None,
        "upstream_url": None,
        "semantic_enabled": True,
        "server_salt": "gateway-tests-salt",
        "max_body_bytes": 1_000_000,
        # The tests read series by tenant id; the default (a digest) has its own tests.
        "metrics_tenant_labels": "id",
        # The cosine-and-entities path these tests were written for; the pair verifier
        # on the hit path has its own tests (tests/gateway/proxy/test_verifier_hits.py).
        "verifier": "off",
    }
    values |= extra
    return Settings(_env_file=None, **values)


def chat_body(
    model: str,
    question: str,
    system: str | None = SHORT_SYSTEM,
    max_tokens: int = MAX_TOKENS,
    **extra: Any,
) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}] if system is not None else []
    messages.append({"role": "user", "content": question})
    return {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
    } | extra


@dataclass
class Gateway:
    """A gateway served by uvicorn on a free port."""

    url: str
    app: Any

    @property
    def state(self) -> GatewayState:
        gw: GatewayState = self.app.state.gateway
        return gw

    @property
    def tenants(self) -> TenantStore:
        return self.state.tenants

    @property
    def admin(self) -> TenantAdmin:
        """The admin service, the one writer of tenants and keys (no cache or limiter
        to clear: the tests delete tenants through the admin API)."""
        return TenantAdmin(self.tenants, None, None)

    @property
    def policies(self) -> PolicyAdmin:
        return PolicyAdmin(self.tenants)

    @property
    def cache(self) -> SemanticCache:
        cache = self.state.pipeline.cache
        assert cache is not None
        return cache

    @property
    def model(self) -> str:
        return self.state.upstream.models()[0]

    def tenant(self, prefix: str = "t", policy: TenantPolicy | None = None) -> tuple[str, str]:
        """A new tenant with one key (and a policy when given): (tenant id, raw key)."""
        tenant_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.admin.add_tenant("tests", tenant_id, None, policy)
        return tenant_id, self.admin.issue_key("tests", tenant_id, "test").key

    def http(self, key: str | None = None, timeout: float = 120.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def openai(self, key: str) -> Any:
        import openai

        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, timeout=120)

    def semantic_verdict(
        self, tenant_id: str, body: dict[str, Any], namespace: str | None = None
    ) -> str | None:
        """The semantic cache's own lookup of ``body`` for the tenant: None on a hit,
        else the miss reason (asked directly, not through HTTP; ``namespace``: the one
        a deleted tenant had, default the tenant's now)."""
        return self.cache.lookup(self.query(tenant_id, body, namespace)).reason

    def query(
        self, tenant_id: str, body: dict[str, Any], namespace: str | None = None
    ) -> SemanticQuery:
        """``body`` as the gateway keys it for the tenant: its namespace (``namespace``:
        the one a deleted tenant had) and the model's weights revision."""
        make = SemanticQuery.from_chat if "messages" in body else SemanticQuery.from_completion
        query = make(tenant=tenant_id, body=body, namespace=namespace or self.namespace(tenant_id))
        return self.state.pipeline.revised(query)

    def namespace(self, tenant_id: str) -> str:
        """The semantic namespace the tenant's requests use (its minted id included)."""
        minted = self.tenants.namespace_id(tenant_id)
        assert minted, "every tenant made since migration 0005 has one"
        return f"tenant:{tenant_id}:{minted}"

    def metrics(self) -> str:
        r = httpx.get(f"{self.url}/metrics", timeout=10)
        assert r.status_code == 200, r.text
        return r.text


@contextmanager
def running_gateway(settings: Settings, components: Components) -> Iterator[Gateway]:
    app = create_app(settings, components)
    with serving(app) as url:
        yield Gateway(url, app)


# ----------------------------------------------------------------- response helpers


def assert_openai_error(r: httpx.Response, status: int, type_: str | None = None) -> dict[str, Any]:
    """The response is an OpenAI-shaped error with this status."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"].strip(), err
    if type_ is not None:
        assert err["type"] == type_, err
    return dict(err)


def sse_payloads(text: str) -> list[Any]:
    """The JSON payloads of an SSE body; checks the framing and the final [DONE].
    Comment events (``: ping``, passed on from an upstream) are skipped, as every SSE
    client skips them."""
    events = [e for e in text.split("\n\n") if e.strip() and not e.startswith(":")]
    assert events, "empty stream"
    assert all(e.startswith("data: ") for e in events), events
    assert events[-1] == "data: [DONE]", events[-1]
    return [json.loads(e[len("data: ") :]) for e in events[:-1]]


def content(resp: httpx.Response) -> str:
    return str(resp.json()["choices"][0]["message"]["content"])


def cached_tokens(resp: httpx.Response) -> int:
    return int(resp.json()["usage"]["prompt_tokens_details"]["cached_tokens"])


def metric(text: str, name: str, **labels: str) -> float:
    """The summed value of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def wait_until(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# ----------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="session")
def pg_available() -> None:
    import psycopg

    try:
        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            conn.execute("select 1")
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL on 127.0.0.1:5432 is unreachable: {exc}")


@pytest.fixture
def pg_schema(pg_available: None) -> Iterator[str]:
    """A fresh, empty schema (dropped afterwards), so parallel runs never collide."""
    import psycopg

    schema = f"cg_gateway_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


# ----------------------------------------------------------------- end to end


@pytest.fixture(scope="session")
def e2e_gw(
    smol_loaded: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    """The end-to-end gateway of test_e2e.py and test_e2e_tenants.py, built once: the
    real SmolLM2 engine in-process (its own cold block pool), the real embedder and a
    real SQLite file."""
    data_dir: Path = tmp_path_factory.mktemp("gateway-e2e")
    parts = Components(engine=smol_engine(smol_loaded), embedder=embedder)
    with running_gateway(gateway_settings(data_dir), parts) as gateway:
        yield gateway
