"""Shared parts of the end-to-end gateway tests (test_e2e*.py): the question pairs
checked with the real embedder and small request helpers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import Components
from gateway.proxy.inprocess import InProcessUpstream
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from semantic import Embedder
from tests.gateway.conftest import (
    SHORT_SYSTEM,
    Gateway,
    gateway_settings,
    metric,
    running_gateway,
    smol_engine,
)

CHAT = "/v1/chat/completions"

# Pairs checked with the real embedder: similarity >= 0.89 (the default threshold)
# and no validator or guard objection; SmolLM2 answers the first in one sentence.
CAPITAL = "What is the capital of France?"
CAPITAL_PARAPHRASES = ("What's the capital city of France?", "Which city is the capital of France?")
SKY = "What color is the sky?"
SKY_PARAPHRASE = "What colour is the sky?"
# Similar wording (0.93), different amount: the validators must refuse the candidate.
SEND_100 = "Can I send 100 euros to Spain?"
SEND_900 = "Can I send 900 euros to Spain?"


@pytest.fixture(scope="module")
def gw(
    smol_loaded: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("gateway-e2e")
    parts = Components(engine=smol_engine(smol_loaded), embedder=embedder)
    with running_gateway(gateway_settings(data_dir), parts) as gateway:
        yield gateway


def engine_of(gw: Gateway) -> PrefixEngine:
    upstream = gw.state.upstream
    assert isinstance(upstream, InProcessUpstream)
    return upstream.engine


def engine_requests(gw: Gateway, **labels: str) -> float:
    """Requests the prefix engine finished (any finish reason unless given)."""
    return metric(gw.metrics(), "prefix_requests_total", **labels)


def post(client: httpx.Client, body: dict[str, Any], **headers: str) -> httpx.Response:
    r = client.post(CHAT, json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r


def ask(question: str, system: str = SHORT_SYSTEM) -> list[Any]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]
