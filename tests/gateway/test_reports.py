"""The misfire report's numbers against a scripted set of labelled samples, request
statistics and engine snapshots (tests/gateway/scripted_report.py), every
expected value computed here from its definition; the request statistics and
engine snapshots written by a live gateway; ``cachegate report``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from gateway.app import Components
from gateway.cli import main
from gateway.models import EngineSnapshot, RequestStat
from gateway.report_stats import wilson
from gateway.stats import PromptBuffer, RequestRecord, StatsRecorder, prompt_text
from prefix.config import EngineConfig
from prefix.engine import PrefixEngine
from prefix.loader import LoadedModel
from tests.gateway.conftest import (
    Gateway,
    assert_openai_error,
    gateway_settings,
    metric,
    running_gateway,
    wait_until,
)
from tests.gateway.scripted_report import (
    ADMIN_TOKEN,
    ALPHA_SAMPLES,
    ALPHA_STATS,
    BETA_SAMPLES,
    BETA_STATS,
    BYTES_PER_BLOCK,
    PRICE_COMPLETION,
    PRICE_PROMPT,
    scripted_gateway,
)

REPORT = "/admin/reports/misfires"
Z = 1.959963984540054


def wilson_ref(k: int, n: int) -> tuple[float, float]:
    """The Wilson score interval, written out independently of gateway.report_stats."""
    p = k / n
    denom = 1 + Z**2 / n
    centre = p + Z**2 / (2 * n)
    spread = Z * math.sqrt(p * (1 - p) / n + Z**2 / (4 * n**2))
    return (centre - spread) / denom, (centre + spread) / denom


def labelled(samples: list[tuple[float, str | None, str | None]]) -> list[tuple[float, bool]]:
    return [(s, lab == "misfire") for s, lab, _ in samples if lab]


def recommended_ref(samples: list[tuple[float, bool]], target: float, upper: bool) -> float | None:
    for t in sorted({s for s, _ in samples}):
        above = [m for s, m in samples if s >= t]
        k, n = sum(above), len(above)
        value = wilson_ref(k, n)[1] if upper else k / n
        if value <= target:
            return t
    return None


@pytest.fixture(scope="module")
def gw(tiny_llama: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with scripted_gateway(tiny_llama, tmp_path_factory.mktemp("scripted-report")) as gateway:
        yield gateway


def report(gw: Gateway, **params: Any) -> dict[str, Any]:
    with gw.http(ADMIN_TOKEN) as http:
        r = http.get(REPORT, params={"format": "json", **params})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    data: dict[str, Any] = r.json()
    return data


def test_wilson_interval_matches_the_formula() -> None:
    assert wilson(0, 0) is None
    for k, n in [(0, 1), (0, 10), (1, 10), (3, 10), (5, 10), (10, 10), (4, 12), (7, 381)]:
        got = wilson(k, n)
        assert got is not None
        assert got == pytest.approx(wilson_ref(k, n), abs=1e-12), (k, n)
    # A published value: 0 of 10 gives [0, 0.2775].
    assert wilson(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-5)


def test_tenant_report_numbers(gw: Gateway) -> None:
    r = report(gw, tenant="alpha", target=0.01, criterion="point")
    s = r["summary"]
    assert r["scope"]["tenant"] == "alpha" and r["tenants"] == {}

    # traffic: 4 semantic hits of 10 requests; 9 requests ran a lookup (hit or miss:*)
    t = s["traffic"]
    assert t["requests"] == 10
    assert t["by_cache"] == {"bypass": 1, "miss": 2, "prefix-hit": 3, "semantic-hit": 4}
    assert t["semantic_hit_rate"] == pytest.approx(4 / 10)
    assert t["semantic_lookups"] == 9
    assert t["eligible_hit_rate"] == pytest.approx(4 / 9)

    # misfires: 3 of 10 labelled, 2 pending, Wilson from the formula
    lab = labelled(ALPHA_SAMPLES)
    k, n = sum(m for _, m in lab), len(lab)
    assert (k, n) == (3, 10)
    m = s["misfires"]
    counts = (m["samples"], m["pending"], m["labelled"], m["misfires"], m["correct"])
    assert counts == (12, 2, 10, 3, 7)
    assert m["rate"] == pytest.approx(0.3)
    lo, hi = wilson_ref(3, 10)
    assert (m["wilson_low"], m["wilson_high"]) == (pytest.approx(lo), pytest.approx(hi))
    assert hi == pytest.approx(0.6032, abs=1e-4)

    # buckets [lo, hi) of width 0.02 from 0.80; the last includes 1.00
    expected_buckets = {}
    edges = [round(0.80 + 0.02 * i, 2) for i in range(11)]
    for lo_e, hi_e in itertools.pairwise(edges):
        inside = [mis for sc, mis in lab if lo_e <= sc < hi_e or (hi_e == 1.0 and sc >= 1.0)]
        expected_buckets[(lo_e, hi_e)] = (len(inside), sum(inside))
    got_buckets = {(b["low"], b["high"]): (b["n"], b["k"]) for b in s["score_buckets"]}
    assert got_buckets == expected_buckets
    assert got_buckets[(0.86, 0.88)] == (2, 2)
    assert got_buckets[(0.88, 0.90)] == (2, 1)
    assert got_buckets[(0.90, 0.92)] == (2, 0)
    bucket = next(b for b in s["score_buckets"] if b["low"] == 0.88)
    assert bucket["rate"] == pytest.approx(0.5)
    assert bucket["wilson_high"] == pytest.approx(wilson_ref(1, 2)[1])

    # recommended threshold, point criterion, 1%: the lowest t with no misfire above it
    rec = s["recommended_threshold"]
    assert rec["threshold"] == pytest.approx(recommended_ref(lab, 0.01, upper=False)) == 0.90
    assert (rec["labelled_at_or_above"], rec["misfires_at_or_above"]) == (6, 0)

    # shadow: 6 verified (4 agree, 2 disagree), 5 of them labelled; agreement with humans:
    # disagree&misfire (0.86, 0.89) + agree&correct (0.88, 0.99) = 4 of 5
    sh = s["shadow"]
    assert (sh["verified"], sh["agree"], sh["disagree"], sh["with_human_label"]) == (6, 4, 2, 5)
    assert sh["agreement_with_humans"] == pytest.approx(4 / 5)

    # prefix: engine-served = prefix-hit, miss, bypass
    engine_rows = [row for row in ALPHA_STATS if row[0] != "semantic-hit"]
    prompt = sum(row[3] for row in engine_rows)
    cached = sum(row[4] for row in engine_rows)
    assert (prompt, cached) == (1050, 480)
    p = s["prefix"]
    assert p["token_hit_rate"] == pytest.approx(480 / 1050)
    assert p["request_hit_rate"] == pytest.approx(3 / 6)

    # TTFT: on = semantic hits + prefix hits; off = miss/bypass with nothing reused
    on = [5.0, 6.0, 7.0, 8.0, 50.0, 60.0, 70.0]
    off = [100.0, 300.0, 200.0]
    ttft = s["ttft_ms"]
    assert ttft["cache_on"] == {"count": 7, "p50": 8.0, "p99": pytest.approx(69.4)}
    assert ttft["cache_off"] == {"count": 3, "p50": 200.0, "p99": pytest.approx(298.0)}
    assert ttft["cache_on"]["p99"] == pytest.approx(float(np.percentile(on, 99)))
    assert ttft["cache_off"]["p99"] == pytest.approx(float(np.percentile(off, 99)))

    # savings: reused prompt tokens (480 prefix + 400 semantic), 80 completion tokens
    sav = s["savings"]
    assert sav["prompt_tokens_saved"] == 880
    assert sav["semantic_completion_tokens"] == 80
    assert sav["cost_saved_usd"] == pytest.approx(
        880 / 1e6 * PRICE_PROMPT + 80 / 1e6 * PRICE_COMPLETION
    )
    model = r["params"]["model"]
    engine = gw.state.upstream.engine  # type: ignore[attr-defined]
    assert model["params"] == engine.loaded.num_params
    layers, heads, hd = model["layers"], model["heads"], model["head_dim"]
    assert (layers, heads, hd) == (
        engine.loaded.config.num_layers,
        engine.loaded.config.num_heads,
        engine.loaded.config.head_dim,
    )
    flops = sum(
        2 * model["params"] * c + 2 * layers * heads * hd * c * (c + 1)
        for c in [160, 160, 160, 100, 100, 100, 100]
    )
    assert sav["prefill_flops_saved"] == pytest.approx(flops)
    assert sav["decode_flops_saved"] == pytest.approx(2 * model["params"] * 80)

    # engine: evictions 5, then a restart (the counter fell to 2: counts 2), then +5
    e = r["engine"]
    assert e["snapshots"] == 4
    assert e["evictions"] == 5 + 2 + 5
    assert e["block_hit_rate"] == pytest.approx((5 + 2 + 7) / (10 + 4 + 10))
    assert e["latest"] == {
        "at": e["memory"][-1]["at"],
        "cached_bytes": 80 * BYTES_PER_BLOCK,
        "used_bytes": 20 * BYTES_PER_BLOCK,
        "total_bytes": 100 * BYTES_PER_BLOCK,
    }
    assert e["used_floor_change_bytes"] == (4 - 10) * BYTES_PER_BLOCK
    assert [x["used_bytes"] for x in e["memory"]] == [b * BYTES_PER_BLOCK for b in (10, 12, 4, 20)]
    assert sum(point["requests"] for point in s["timeline"]) == 10
    assert s["antipatterns"] == []


def test_recommended_threshold_with_the_wilson_upper_bound(gw: Gateway) -> None:
    lab = labelled(ALPHA_SAMPLES)
    # 1%: no threshold qualifies; with no misfire the bound reaches 1% only at n >= 381
    rec = report(gw, tenant="alpha", target=0.01)["summary"]["recommended_threshold"]
    assert rec["criterion"] == "wilson_upper"
    assert rec["threshold"] is None and recommended_ref(lab, 0.01, upper=True) is None
    assert rec["samples_needed_at_zero_misfires"] == math.ceil(Z**2 * 99) == 381
    assert wilson_ref(0, 381)[1] <= 0.01 < wilson_ref(0, 380)[1]
    assert "381" in rec["reason"]
    # 50%: t = 0.88 (1 misfire of 8 above it: upper bound 0.471), not 0.87 (2 of 9: 0.547)
    rec = report(gw, tenant="alpha", target=0.5)["summary"]["recommended_threshold"]
    assert rec["threshold"] == recommended_ref(lab, 0.5, upper=True) == 0.88
    assert rec["wilson_high"] == pytest.approx(wilson_ref(1, 8)[1])
    assert wilson_ref(2, 9)[1] > 0.5 >= wilson_ref(1, 8)[1]
    # point criterion at 15%: also 0.88 (1/8 = 12.5%; 2/9 = 22%)
    rec = report(gw, tenant="alpha", target=0.15, criterion="point")["summary"]
    assert rec["recommended_threshold"]["threshold"] == 0.88


def test_overall_report_and_tenant_sections(gw: Gateway) -> None:
    r = report(gw)
    s = r["summary"]
    assert r["scope"]["tenant"] is None
    assert s["traffic"]["requests"] == len(ALPHA_STATS) + len(BETA_STATS) == 12
    assert s["traffic"]["semantic_hit_rate"] == pytest.approx(5 / 12)
    k = sum(m for _, m in labelled(ALPHA_SAMPLES) + labelled(BETA_SAMPLES))
    n = len(labelled(ALPHA_SAMPLES)) + len(labelled(BETA_SAMPLES))
    assert (s["misfires"]["misfires"], s["misfires"]["labelled"]) == (k, n) == (4, 12)
    assert s["misfires"]["wilson_high"] == pytest.approx(wilson_ref(4, 12)[1])
    assert set(r["tenants"]) == {"alpha", "beta"}
    beta = r["tenants"]["beta"]
    assert beta["misfires"]["rate"] == pytest.approx(0.5)
    assert beta["traffic"]["requests"] == 2
    assert beta["prefix"]["token_hit_rate"] == 0.0
    assert r["tenants"]["alpha"]["misfires"]["rate"] == pytest.approx(0.3)
    assert report(gw, tenant="nobody")["summary"]["traffic"]["requests"] == 0


def test_report_auth_and_parameters(gw: Gateway) -> None:
    _tenant, key = gw.tenant("rep")
    with gw.http() as anon, gw.http(key) as tenant_client, gw.http("wrong") as wrong:
        assert_openai_error(anon.get(REPORT), 401)
        assert_openai_error(wrong.get(REPORT), 401)
        assert_openai_error(tenant_client.get(REPORT), 403, "permission_error")
    with gw.http(ADMIN_TOKEN) as http:
        bad_params: list[dict[str, str]] = [
            {"target": "2"},
            {"target": "0"},
            {"target": "1e-308"},
            {"format": "xml"},
            {"hours": "-1"},
            {"criterion": "median"},
            {"tenant": "a\x00b"},
        ]
        for bad in bad_params:
            assert_openai_error(http.get(REPORT, params=bad), 400)
        html = http.get(REPORT)
        assert html.status_code == 200
        assert html.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in html.headers["content-security-policy"]
        assert html.text.count('src="data:image/png;base64,') == 4


def test_cli_report_prints_the_summary(gw: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--url", gw.url, "--token", ADMIN_TOKEN, "--tenant", "alpha"]) == 0
    out = capsys.readouterr().out
    assert "cachegate report: alpha" in out
    assert "semantic hit rate     40.0% of requests, 44.4% of lookups" in out
    lo, hi = wilson_ref(3, 10)
    assert (
        f"misfire rate          30.0%  3/10 labelled, 95% Wilson [{100 * lo:.1f}%, {100 * hi:.1f}%]"
        in out
    )
    assert "prefix hit rate       tokens 45.7%  |  requests 50.0%" in out
    assert (
        "TTFT p50/p99          cache on 8.0 ms/69.4 ms (n=7)  |  cache off 200.0 ms/298.0 ms" in out
    )
    assert "engine: evictions 12" in out
    assert main(["report", "--url", gw.url, "--token", "wrong"]) == 1
    assert "401" in capsys.readouterr().err


# ----------------------------------------------------------------- a live gateway's statistics

PREFIX = " ".join(f"t{3 + i % 120}" for i in range(40))  # tiny-Llama words: 40 tokens


@pytest.fixture(scope="module")
def live(tiny_llama: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("live-stats"),
        semantic_enabled=False,
        admin_token=ADMIN_TOKEN,
        stats_flush_seconds=0.1,
        engine_snapshot_seconds=0.2,
    )
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=128), loaded=tiny_llama)
    with running_gateway(settings, Components(engine=engine)) as gateway:
        yield gateway


def stat_rows(gw: Gateway, tenant: str) -> list[RequestStat]:
    with Session(gw.app.state.db) as s:
        return list(
            s.scalars(
                select(RequestStat).where(RequestStat.tenant_id == tenant).order_by(RequestStat.id)
            )
        )


def snapshot_count(gw: Gateway) -> int:
    with Session(gw.app.state.db) as s:
        return len(list(s.scalars(select(EngineSnapshot.id))))


def test_live_requests_are_recorded_and_engine_snapshots_taken(live: Gateway) -> None:
    tenant, key = live.tenant("live")
    body = {"model": live.model, "prompt": PREFIX + " t99", "max_tokens": 4, "temperature": 0}
    with live.http(key) as http:
        first = http.post("/v1/completions", json=body)
        second = http.post("/v1/completions", json=body | {"stream": True})
        third = http.post("/v1/completions", json=body, headers={"Cache-Control": "no-cache"})
    assert first.status_code == second.status_code == third.status_code == 200
    assert wait_until(lambda: len(stat_rows(live, tenant)) == 3, timeout=10)
    rows = stat_rows(live, tenant)
    assert [r.cache for r in rows] == ["miss", "prefix-hit", "prefix-hit"]
    assert [r.stream for r in rows] == [False, True, False]
    assert rows[0].semantic == "skipped:disabled" and rows[2].semantic == "skipped:disabled"
    assert rows[0].prompt_tokens == first.json()["usage"]["prompt_tokens"] == 41
    assert rows[0].cached_tokens == 0 and rows[1].cached_tokens == 40
    assert all(r.ttft_ms is not None and 0 < r.ttft_ms <= r.latency_ms for r in rows)
    assert all(r.completion_tokens == 4 for r in rows)

    engine = live.state.upstream.engine  # type: ignore[attr-defined]
    before = snapshot_count(live)
    assert wait_until(lambda: snapshot_count(live) >= before + 2, timeout=10)
    with Session(live.app.state.db) as s:
        snap = s.scalars(select(EngineSnapshot).order_by(EngineSnapshot.id.desc())).first()
    assert snap is not None
    assert snap.blocks_total == engine.pool.num_blocks == 128
    assert snap.bytes_per_block == engine.kv_cache.bytes_per_block
    assert snap.blocks_cached >= 10 and snap.hit_blocks >= 10

    r = report(live, tenant=tenant)
    assert r["summary"]["traffic"]["requests"] == 3
    assert r["summary"]["prefix"]["token_hit_rate"] == pytest.approx(80 / 123)
    assert r["engine"]["snapshots"] >= 2


def test_live_prompts_feed_the_antipattern_finder(live: Gateway) -> None:
    tenant, key = live.tenant("ap")
    with live.http(key) as http:
        for i in range(6):  # a different token at the very start, then 40 shared tokens
            body = {
                "model": live.model,
                "prompt": f"t{100 + i} {PREFIX} t{10 + i}",
                "max_tokens": 1,
            }
            assert http.post("/v1/completions", json=body).status_code == 200
    findings = report(live, tenant=tenant)["summary"]["antipatterns"]
    assert [f["kind"] for f in findings] == ["volatile_prefix"]
    f = findings[0]
    assert f["tenant"] == tenant and f["tokenizer"] == "engine"
    assert f["pairs"] == f["pairs_checked"] == 5
    assert f["first_diff_token"] == 0 and f["reused_tokens_now"] == 0
    assert f["reusable_tokens_if_fixed"] == 40  # 40 shared tokens = 10 blocks of 4
    assert f["gain_tokens_per_request"] == 40
    # the clean tenant from the other test has no finding
    other = report(live)["tenants"]
    assert all(t == tenant or not part["antipatterns"] for t, part in other.items())


def test_stats_recorder_drops_rows_when_the_database_is_down(tmp_path: Path) -> None:
    db = create_engine(f"sqlite:///{tmp_path / 'missing-dir' / 'x.db'}")
    registry = CollectorRegistry()
    recorder = StatsRecorder(db, registry, flush_seconds=0.05)

    async def scenario() -> int:
        recorder.start()
        for _ in range(3):
            recorder.record(
                RequestRecord("t", "miss", "miss:empty", None, 10, 0, 1), {"prompt": "x"}
            )
        await asyncio.sleep(0.3)
        written = await recorder.flush()
        await recorder.stop()
        return written

    started = time.monotonic()
    assert asyncio.run(scenario()) == 0
    assert time.monotonic() - started < 5
    dropped = metric(
        generate_latest(registry).decode(), "cachegate_stats_dropped_total", reason="database"
    )
    assert dropped == 3
    assert recorder.prompts.recent("t") == ["x", "x", "x"]  # kept in memory all the same
    recorder.prompts.forget("t")
    assert recorder.prompts.recent("t") == [] and recorder.prompts.tenants() == []


def test_prompt_buffer_is_bounded_per_tenant_and_in_tenants() -> None:
    buffer = PromptBuffer(per_tenant=3, max_tenants=2)
    for i in range(5):
        buffer.add("a", f"a{i}")
    buffer.add("b", "b0")
    buffer.add("a", "a5")  # a is now the most recently active tenant
    buffer.add("c", "c0")  # evicts b, the least recently active
    assert buffer.recent("a") == ["a3", "a4", "a5"]
    assert buffer.tenants() == ["a", "c"] and buffer.recent("b") == []
    chat = {
        "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": "A"},
            {"role": "user", "content": "Q2"},
        ]
    }
    assert prompt_text(chat) == "S\nQ1"
    assert prompt_text({"prompt": "P"}) == "P"
    assert prompt_text({"prompt": [1, 2]}) is None and prompt_text({"messages": []}) is None
