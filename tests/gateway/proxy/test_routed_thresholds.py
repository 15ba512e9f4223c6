"""Under ``CACHEGATE_EMBEDDER=auto`` a tenant's thresholds stay MiniLM cosines: the
gateway puts them on the routed scale (semantic/embedder_routed.py), so the same
English questions pass as under MiniLM alone. Here with the verifier off, where the
tenant's ``threshold`` (default 0.89) decides alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.app import Components
from gateway.policy import TenantPolicy
from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.conftest import Gateway, chat_body, gateway_settings, running_gateway
from tests.gateway.scripted_upstream import scripted_upstream


@pytest.fixture(scope="module")
def gw(embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    routed = RoutedEmbedder(embedder, E5Embedder(progress=False))
    with scripted_upstream("vllm") as up:
        settings = gateway_settings(tmp_path_factory.mktemp("routed"), upstream_url=up.url)
        with running_gateway(settings, Components(embedder=routed)) as g:
            yield g


def semantic_header(gw: Gateway, key: str, question: str) -> str:
    with gw.http(key) as http:
        r = http.post("/v1/chat/completions", json=chat_body(rec.MODEL, question))
    assert r.status_code == 200, r.text
    return r.headers["x-cachegate-semantic"]


@pytest.mark.parametrize(
    ("asked", "minilm_cosine", "served"),
    [
        ("Tell me the capital of France", 0.9547, True),  # above 0.89
        ("What's France's capital city?", 0.9437, True),
        # 0.86 < 0.89: a miss, as under MiniLM alone; on the routed scale it is 0.956,
        # which an unmapped 0.89 would have served
        ("How can I change my password?", 0.8601, False),
    ],
)
def test_the_default_threshold_means_what_it_means_under_minilm(
    gw: Gateway, asked: str, minilm_cosine: float, served: bool
) -> None:
    france = "France" in asked
    stored = "What is the capital of France?" if france else "How do I reset my password?"
    key = gw.tenant("routed", TenantPolicy(sample_rate=0.0))[1]
    assert semantic_header(gw, key, stored).startswith("miss")
    assert semantic_header(gw, key, stored) == "hit"  # positive control: the same question
    header = semantic_header(gw, key, asked)
    assert header == ("hit" if served else "miss:below_threshold"), (header, minilm_cosine)
