"""The misfire report's numbers against a scripted set of labelled samples, request
statistics and engine snapshots (tests/gateway/scripted_report.py), every
expected value computed here from its definition; ``cachegate report``.

The request statistics and engine snapshots written by a live gateway are in
test_report_stats.py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest

from gateway.cli import main
from gateway.reports.stats import wilson
from prefix.model.loader import LoadedModel
from tests.gateway.conftest import (
    Gateway,
    assert_openai_error,
)
from tests.gateway.report_support import REPORT, report
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

Z = 1.959963984540054


def wilson_ref(k: int, n: int) -> tuple[float, float]:
    """The Wilson score interval, written out independently of gateway.reports.stats."""
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
    # the shadow agreed with one of the three labelled misfires it checked (0.87)
    assert (sh["labelled_misfires"], sh["agree_on_labelled_misfires"]) == (3, 1)

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
    engine = gw.state.upstream.engine
    assert engine is not None
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
    # a tenant that does not exist: a 404, not an empty report with an invented cut
    # (session 45's review: a typo looked like a quiet tenant)
    with gw.http(ADMIN_TOKEN) as http:
        err = assert_openai_error(http.get(REPORT, params={"tenant": "nobody"}), 404)
    assert err["code"] == "tenant_not_found"


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
        alpha = http.get(REPORT, params={"tenant": "alpha"}).text
        assert "the shadow agreed with\n1 of the 3 hits labelled misfire" in alpha


def test_cli_report_prints_the_summary(gw: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--url", gw.url, "--token", ADMIN_TOKEN, "--tenant", "alpha"]) == 0
    out = capsys.readouterr().out
    assert "cachegate report: alpha" in out
    assert "semantic hit rate     40.0% of requests, 44.4% of lookups" in out
    lo, hi = wilson_ref(3, 10)
    ci = f"95% Wilson [{100 * lo:.1f}%, {100 * hi:.1f}%]"
    # no sampling probability recorded in these samples: the plain share leads
    assert f"misfire rate          30.0%  {ci} (unweighted)" in out
    assert f"  among the samples   30.0%  3/10 labelled, {ci}" in out
    assert "prefix hit rate       tokens 45.7%  |  requests 50.0%" in out
    assert (
        "TTFT p50/p99          cache on 8.0 ms/69.4 ms (n=7)  |  cache off 200.0 ms/298.0 ms" in out
    )
    assert "engine: evictions 12" in out
    assert main(["report", "--url", gw.url, "--token", "wrong"]) == 1
    assert "401" in capsys.readouterr().err


def test_cli_report_errors_are_the_gateways_message(
    gw: Gateway, capsys: pytest.CaptureFixture[str]
) -> None:
    """The raw JSON body was printed (session 45's review); now its message, as the
    other admin commands print it."""
    assert main(["report", "--url", gw.url, "--token", "wrong"]) == 1
    assert main(["report", "--url", gw.url, "--token", ADMIN_TOKEN, "--tenant", "typo"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: 401: ") and "{" not in err[0]
    assert err[1].startswith("error: 404: no such tenant")
