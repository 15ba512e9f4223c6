"""Under ``CACHEGATE_EMBEDDER=auto`` a tenant's thresholds stay MiniLM cosines: the
gateway puts them on the routed scale (semantic/embedder_routed.py), so the same
English questions pass as under MiniLM alone. Here with the verifier off, where the
tenant's ``threshold`` (default 0.89) decides alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.policy import TenantPolicy
from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder, on_routed_scale
from tests.gateway import vllm_recordings as rec
from tests.gateway.admin_support import admin
from tests.gateway.conftest import Gateway, chat_body
from tests.gateway.proxy.knob_support import knob_gateway, semantic_header


@pytest.fixture(scope="module")
def gw(embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    routed = RoutedEmbedder(embedder, E5Embedder(progress=False))
    with knob_gateway(tmp_path_factory.mktemp("routed"), routed) as g:
        yield g


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


def test_explain_shows_the_threshold_on_the_scale_of_its_scores(gw: Gateway) -> None:
    tenant, key = gw.tenant("routed", TenantPolicy(sample_rate=0.0))
    assert semantic_header(gw, key, "What is the capital of France?").startswith("miss")
    with admin(gw) as client:
        asked = chat_body(rec.MODEL, "Tell me the capital of France")
        searched = client.post(f"/tenants/{tenant}/cache/explain", json={"body": asked}).json()
        # stopped before the search (temperature above the tenant's maximum): the
        # threshold shown is still the one a search would apply, not the raw knob
        hot = asked | {"temperature": 1.5}
        skipped = client.post(f"/tenants/{tenant}/cache/explain", json={"body": hot}).json()
    assert searched["decision"] == "hit" and skipped["decision"] == "skipped"
    for report in (searched, skipped):
        assert report["threshold"] == pytest.approx(on_routed_scale(0.89))
        assert report["threshold_setting"] == 0.89  # the knob, a MiniLM cosine
    # the best score is on the same scale: MiniLM's 0.9547 read as a routed score
    assert searched["best_score"] == pytest.approx(on_routed_scale(0.9547), abs=1e-3)
