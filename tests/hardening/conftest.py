"""The live servers the hardening suite fires at: one gateway over the real SmolLM2
engine, the real embedder, SQLite and the admin API, with a tenant whose semantic
partition already holds an entry; and one engine server (the tiny Llama, fast).
Built once for the folder."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import Components
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from prefix.serve.server import create_engine_app
from protocol.responses import response_body, usage
from semantic import Embedder
from tests.gateway.admin_support import ADMIN, ADMIN_TOKEN
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway, smol_engine
from tests.live_server import serving

SYSTEM = "Answer in one short sentence."
STORED_QUESTION = "What is the capital of France?"


@dataclass
class Target:
    """A gateway with a tenant key whose chat partition is not empty."""

    gw: Gateway
    key: str
    tenant: str

    def chat_body(self, question: str = "What is the capital of Spain?") -> dict[str, Any]:
        # Temperature 0 and max_tokens 2: the partition the stored entry lives in.
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        return {"model": self.gw.model, "messages": messages, "temperature": 0, "max_tokens": 2}

    def completion_body(self) -> dict[str, Any]:
        return {"model": self.gw.model, "prompt": "The capital of Spain is", "max_tokens": 2}


@pytest.fixture(scope="session")
def target(
    smol_loaded: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    data_dir: Path = tmp_path_factory.mktemp("hardening")
    settings = gateway_settings(data_dir, admin_token=ADMIN_TOKEN, max_body_bytes=400_000)
    parts = Components(engine=smol_engine(smol_loaded, num_blocks=96), embedder=embedder)
    with running_gateway(settings, parts) as gw:
        tenant, key = gw.tenant("fuzz")
        t = Target(gw, key, tenant)
        body = t.chat_body(STORED_QUESTION)
        query = gw.query(tenant, body)
        answer = response_body("chat", "chatcmpl-seed", gw.model, "Paris.", "stop", usage(9, 2, 0))
        assert gw.cache.store(query, answer).stored  # the partition the fuzzing lands in
        yield t


@pytest.fixture(scope="session")
def engine_url(tiny_llama: LoadedModel) -> Iterator[str]:
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=128), loaded=tiny_llama)
    with serving(create_engine_app(engine, served_model_name="tiny")) as url:
        yield url


def admin_client(gw: Gateway) -> httpx.Client:
    return httpx.Client(base_url=f"{gw.url}/admin", headers=ADMIN, timeout=60)
