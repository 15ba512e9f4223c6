"""bench/vs_vllm.py: its measurement helpers, its table, and a quick run of our engine.

The end-to-end test starts the real ``cachegate engine`` process (the bundled
model) with the bench's tiny sizes, so it is marked slow; the vLLM column is
not exercised here (it needs bench/setup_vllm.sh's environment).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import vs_vllm
from bench.vs_vllm_client import Timing, percentile
from bench.vs_vllm_report import at_least_as_good, markdown_table, rows
from bench.vs_vllm_servers import ServerSpec, running
from bench.vs_vllm_workloads import QUICK, Sizes, make_prompts


@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 99, 100])
@pytest.mark.parametrize("n", [1, 2, 7, 32])
def test_percentile_matches_numpy_linear(q: float, n: int) -> None:
    values = list(np.random.default_rng(n).exponential(0.7, size=n))
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_timing_rates() -> None:
    t = Timing(10.0, 10.5, 12.5, completion_tokens=9, prompt_tokens=3, cached_tokens=None)
    assert t.ttft_s == pytest.approx(0.5)
    assert t.decode_tokens_per_s == pytest.approx(8 / 2.0)
    one = Timing(10.0, 10.5, 10.5, completion_tokens=1, prompt_tokens=3, cached_tokens=0)
    assert one.decode_tokens_per_s is None


def test_prompts_are_deterministic_and_share_exactly_the_prefixes() -> None:
    sizes = Sizes(
        prefix_tokens=40,
        suffix_tokens=5,
        ttft_repeats=3,
        shared_tokens=20,
        question_tokens=4,
        concurrency=(2, 3),
    )
    a = make_prompts(sizes, vocab=1000, seed=7)
    assert a == make_prompts(sizes, vocab=1000, seed=7)
    assert a != make_prompts(sizes, vocab=1000, seed=8)
    for cold, hit in zip(a.cold, a.hit, strict=True):
        assert len(cold) == len(hit) == 45
        assert cold[:40] == hit[:40] and cold[40:] != hit[40:]
    assert len({tuple(c[:40]) for c in a.cold}) == 3  # every cold sample a new prefix
    shared = a.decode[:20]
    everyone = [a.shared_warm, a.decode, *a.waves[2], *a.waves[3]]
    assert all(p[:20] == shared and len(p) == 24 for p in everyone)
    assert len({tuple(p) for p in everyone}) == len(everyone)
    assert all(100 <= t < 1000 for p in everyone for t in p)


def _engine(cold: float, hit: float, decode: float, tps8: float, p50: float) -> dict:
    return {
        "ttft": {"cold_median_s": cold, "hit_median_s": hit},
        "decode": {"decode_tokens_per_s": decode},
        "concurrent": {"8": {"output_tokens_per_s": tps8, "ttft_p50_s": p50, "ttft_p99_s": p50}},
    }


def test_table_ratios_and_direction() -> None:
    engines = {
        "vllm bf16": _engine(2.0, 0.5, 20.0, 100.0, 0.7),
        "cachegate bfloat16": _engine(1.0, 0.6, 30.0, 50.0, 0.7),
    }
    table = rows(engines)
    assert [r.name for r in table][:4] == [
        "cold TTFT",
        "prefix-hit TTFT",
        "1 stream decode",
        "8 streams output",
    ]
    by = {r.name: r for r in table}
    ours, ref = "cachegate bfloat16", "vllm bf16"
    assert at_least_as_good(by["cold TTFT"], 1.0, 2.0) is True  # lower TTFT wins
    assert at_least_as_good(by["prefix-hit TTFT"], 0.6, 0.5) is False
    assert at_least_as_good(by["1 stream decode"], 30.0, 20.0) is True  # higher tok/s wins
    text = markdown_table(table, [ref, ours], ref)
    lines = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()}
    assert lines["cold TTFT"].endswith("| 0.50× ✓ |")
    assert lines["prefix-hit TTFT"].endswith("| 1.20× ✗ |")
    assert lines["8 streams output"].endswith("| 0.50× ✗ |")
    assert lines["8 streams TTFT p50"].endswith("| 1.00× ✓ |")
    assert f"{ours} / {ref}" in text.splitlines()[0]


def test_table_without_reference_has_no_ratio_column() -> None:
    text = markdown_table(
        rows({"cachegate default": _engine(1, 1, 1, 1, 1)}), ["cachegate default"], None
    )
    assert "/" not in text.splitlines()[0]


def test_a_server_that_dies_while_loading_is_reported_with_its_log(tmp_path: Path) -> None:
    code = "import sys; print('weights missing', flush=True); sys.exit(3)"
    spec = ServerSpec("broken", [sys.executable, "-c", code, "{port}"], ready_timeout_s=30)
    with (
        pytest.raises(RuntimeError, match=r"exited with code 3(.|\n)*weights missing"),
        running(spec, tmp_path),
    ):
        pass


def test_vllm_dtype_columns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(vs_vllm, "vllm_version", lambda python: "0.32.0 2.13.0+cpu")
    base = ["--vllm-python", "python", "--vllm-model", str(tmp_path), "--ours", "default"]
    for flag, want in (
        ([], [("vllm bf16", "bfloat16")]),
        (
            ["--vllm-dtype", "float32,bfloat16"],
            [("vllm fp32", "float32"), ("vllm bf16", "bfloat16")],
        ),
    ):
        servers, _ = vs_vllm.specs(vs_vllm.parse_args(base + flag))
        vllm = [s for s in servers if s.label.startswith("vllm")]
        assert [(s.label, s.argv[s.argv.index("--dtype") + 1]) for s in vllm] == want
    with pytest.raises(SystemExit, match="float16"):
        vs_vllm.specs(vs_vllm.parse_args([*base, "--vllm-dtype", "float16"]))


@pytest.mark.slow
def test_quick_run_against_our_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--quick", "--results-dir", str(tmp_path), "--log-dir", str(tmp_path / "logs")]
    assert vs_vllm.main(args) == 0
    out = capsys.readouterr().out
    assert "vLLM column SKIPPED" in out
    payload = json.loads((tmp_path / "vs_vllm_quick.json").read_text())
    assert payload["errors"] == {}
    result = payload["engines"]["cachegate default"]
    ttft = result["ttft"]
    assert len(ttft["cold_s"]) == QUICK.ttft_repeats
    # The cold prompts are new to the server; the hit prompts reuse their whole prefix.
    assert ttft["cold_cached_tokens"] == [0] * QUICK.ttft_repeats
    assert ttft["hit_cached_tokens"] == [QUICK.prefix_tokens] * QUICK.ttft_repeats
    assert result["decode"]["completion_tokens"] == QUICK.decode_tokens
    for n in QUICK.concurrency:
        wave = result["concurrent"][str(n)]
        assert wave["completion_tokens"] == n * QUICK.concurrent_tokens
        assert wave["cached_tokens"] == [QUICK.shared_tokens] * n
        assert 0 < wave["ttft_p50_s"] <= wave["ttft_p99_s"] < wave["wall_s"]
    assert (tmp_path / "vs_vllm_quick.png").stat().st_size > 10_000
    assert "| cold TTFT | s |" in out
