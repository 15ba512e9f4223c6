"""The judge band: hits scored inside a tenant's band are served only when the
upstream model answers "yes, same answer". The tiny random Llama behind this
gateway can only emit word tokens like "t57", never a yes, so inside the band
every hit is refused deterministically; outside it the same hit is served."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.policy import JudgeBand, TenantPolicy
from prefix.model.loader import LoadedModel
from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder
from tests.gateway.admin_support import admin_gateway, completion, seed
from tests.gateway.conftest import Gateway, metric
from validators.judge import JudgeVerdict

pytestmark = pytest.mark.slow

QUESTION = "t5 t6 t7 t8 t9 t10 t11 t12"


@pytest.fixture(scope="module")
def gw(
    tiny_llama: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    with admin_gateway(tmp_path_factory.mktemp("judge"), tiny_llama, embedder) as gateway:
        yield gateway


def ask(gw: Gateway, key: str) -> tuple[str, str]:
    with gw.http(key) as http:
        r = http.post("/v1/completions", json=completion(gw.model, QUESTION))
    assert r.status_code == 200, r.text
    return r.headers["x-cachegate-cache"], r.headers["x-cachegate-semantic"]


def test_hits_inside_the_judge_band_need_the_models_yes(
    gw: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    guards_off: dict[str, Any] = {"guards": [], "entity_kinds": []}
    outside_id, outside_key = gw.tenant(
        "judge-out",
        TenantPolicy(**guards_off, judge_band=JudgeBand(low=0.0, high=0.5)),
    )
    inside_id, inside_key = gw.tenant(
        "judge-in", TenantPolicy(**guards_off, judge_band=JudgeBand(low=0.0, high=1.0))
    )
    for tenant in (outside_id, inside_id):
        seed(gw, tenant, completion(gw.model, QUESTION), answer="canned")

    # Positive control: the score (1.0) is above the band, so no judge is asked.
    assert ask(gw, outside_key) == ("semantic-hit", "hit")
    before = metric(
        gw.metrics(), "cachegate_semantic_misses_total", tenant=inside_id, reason="judge_refused"
    )
    with caplog.at_level("INFO", logger="cachegate.gateway"):
        cache, semantic = ask(gw, inside_key)
    # The model was really asked (this base model has no chat template, so the judge
    # fell back to a plain completion) and its word-token answer is no "yes".
    assert any("judge_unparseable" in r.getMessage() for r in caplog.records)
    # ... without the model's words, which may echo the prompt's questions
    assert not any("judge_unparseable:" in r.getMessage() for r in caplog.records)
    assert semantic == "miss:judge_refused" and cache != "semantic-hit"
    after = metric(
        gw.metrics(), "cachegate_semantic_misses_total", tenant=inside_id, reason="judge_refused"
    )
    assert after == before + 1


def test_a_refused_hit_is_not_counted_nor_slides_its_entry(gw: Gateway) -> None:
    # The hit is looked up pending and only counted once the judge agrees: a refused
    # one was never served, so it must not keep its entry alive (a sliding TTL) nor
    # show it as hit. Control: the same hit above the band is counted and slides.
    off: dict[str, Any] = {"guards": [], "entity_kinds": [], "sliding_ttl": True}
    entries = {}
    for name, high in (("in", 1.0), ("out", 0.5)):
        band = JudgeBand(low=0.0, high=high)
        tenant, key = gw.tenant(f"judge-slide-{name}", TenantPolicy(**off, judge_band=band))
        entry_id = seed(gw, tenant, completion(gw.model, QUESTION), answer="canned")
        before = gw.cache.get_entry(entry_id).expires_at
        expected = "miss:judge_refused" if name == "in" else "hit"
        assert ask(gw, key)[1] == expected
        entries[name] = gw.cache.get_entry(entry_id), before
    refused, before = entries["in"]
    assert (refused.hit_count, refused.last_hit_at, refused.expires_at) == (0, None, before)
    served, before = entries["out"]
    assert served.hit_count == 1 and served.expires_at is not None and before is not None
    assert served.expires_at > before


def test_a_hit_the_judge_accepts_is_served_and_counted(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This tiny model never says yes, so the judge's verdict is replaced by one that
    # does: what is tested is the pipeline's confirmation of the pending hit.
    async def yes(*_args: Any, **_kwargs: Any) -> JudgeVerdict:
        return JudgeVerdict(True, "judge_yes")

    monkeypatch.setattr(gw.state.pipeline.judge, "same_answer", yes)
    off: dict[str, Any] = {"guards": [], "entity_kinds": [], "sliding_ttl": True}
    tenant, key = gw.tenant(
        "judge-yes", TenantPolicy(**off, judge_band=JudgeBand(low=0.0, high=1.0))
    )
    entry_id = seed(gw, tenant, completion(gw.model, QUESTION), answer="canned")
    before = gw.cache.get_entry(entry_id).expires_at
    assert ask(gw, key) == ("semantic-hit", "hit")
    entry = gw.cache.get_entry(entry_id)
    assert entry.hit_count == 1 and entry.expires_at is not None and before is not None
    assert entry.expires_at > before

    # Its entry deleted while the judge was asked: a miss, answered by the model.
    async def yes_after_delete(*_args: Any, **_kwargs: Any) -> JudgeVerdict:
        gw.cache.invalidate(entry_id=entry_id)
        return JudgeVerdict(True, "judge_yes")

    monkeypatch.setattr(gw.state.pipeline.judge, "same_answer", yes_after_delete)
    assert ask(gw, key) == ("miss", "miss:vanished")


def test_the_judge_asks_under_the_tenants_kv_quota(
    gw: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    # A judge call takes KV blocks from the tenant's share of the pool: with a quota of
    # one block its prompt is refused by the engine (a judge error, the hit refused),
    # where without the quota the model would have answered (judge_unparseable above).
    guards_off: dict[str, Any] = {"guards": [], "entity_kinds": []}
    tenant, key = gw.tenant(
        "judge-quota",
        TenantPolicy(**guards_off, judge_band=JudgeBand(low=0.0, high=1.0), kv_block_quota=1),
    )
    seed(gw, tenant, completion(gw.model, QUESTION), answer="canned")
    with caplog.at_level("INFO", logger="cachegate.gateway"):
        assert ask(gw, key)[1] == "miss:judge_refused"
    refusals = [r.getMessage() for r in caplog.records if "judge refused" in r.getMessage()]
    assert refusals and all(m.endswith(": judge_error") for m in refusals), refusals


def test_under_the_routed_embedder_the_band_is_a_minilm_cosine(
    tiny_llama: LoadedModel, embedder: Embedder, tmp_path: Path
) -> None:
    # CACHEGATE_EMBEDDER=auto: "Tell me the capital of France" scores MiniLM 0.9547
    # against the stored question, 0.9858 on the routed scale. A band of 0.90-0.96
    # (MiniLM) holds it, so the judge is asked (and this model's answer is no "yes");
    # read unmapped, the band would have let the hit through unjudged.
    routed = RoutedEmbedder(embedder, E5Embedder(progress=False))
    with admin_gateway(tmp_path, tiny_llama, routed) as g:
        off: dict[str, Any] = {"guards": [], "entity_kinds": []}
        band = JudgeBand(low=0.90, high=0.96)
        for name, policy in (("in", TenantPolicy(**off, judge_band=band)), ("none", None)):
            tenant, key = g.tenant(f"routed-{name}", policy or TenantPolicy(**off))
            seed(g, tenant, completion(g.model, "What is the capital of France?"))
            with g.http(key) as http:
                body = completion(g.model, "Tell me the capital of France")
                r = http.post("/v1/completions", json=body)
            assert r.status_code == 200, r.text
            expected = "miss:judge_refused" if name == "in" else "hit"  # control: no band
            assert r.headers["x-cachegate-semantic"] == expected


def test_under_e5_the_band_is_a_minilm_cosine_too(tiny_llama: LoadedModel, tmp_path: Path) -> None:
    # CACHEGATE_EMBEDDER=e5: "Tell me the capital of France" scores 0.9389 against the
    # stored question. A threshold of 0.75 and a band of 0.75-0.82 (MiniLM cosines) read
    # 0.9219 and 0.9219-0.9438 on e5's scale, so the judge is asked (and this model's
    # answer is no "yes"); read raw, the band would have let the hit through unjudged.
    with admin_gateway(tmp_path, tiny_llama, E5Embedder(progress=False)) as g:
        off: dict[str, Any] = {"guards": [], "entity_kinds": [], "threshold": 0.75}
        band = JudgeBand(low=0.75, high=0.82)
        for name, policy in (
            ("in", TenantPolicy(**off, judge_band=band)),
            ("none", TenantPolicy(**off)),  # control: no band, the same hit served
        ):
            tenant, key = g.tenant(f"e5-{name}", policy)
            seed(g, tenant, completion(g.model, "What is the capital of France?"))
            with g.http(key) as http:
                body = completion(g.model, "Tell me the capital of France")
                r = http.post("/v1/completions", json=body)
            assert r.status_code == 200, r.text
            expected = "miss:judge_refused" if name == "in" else "hit"
            assert r.headers["x-cachegate-semantic"] == expected
