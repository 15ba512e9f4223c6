"""bench/verifier_int8_rows.py end to end, shortened: a shared int8 forward moves a
pair's score, one row per forward (as served) and float32 do not; both ways timed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench import verifier_int8_rows
from tests.bench.bench_main import run_main

pytestmark = pytest.mark.slow


def test_bench_measures_the_dependence_and_times_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["verifier_int8_rows.py", "--calls", "3", "--pairs", "8"]
    run_main(verifier_int8_rows.main, argv, tmp_path, monkeypatch)
    results = json.loads((tmp_path / "verifier_int8_rows.json").read_text())["results"]
    assert results["int8_forward_chunk"] == 1
    assert results["dependence_shared_forward_int8"]["mean"] > 0  # the effect exists
    assert results["dependence_served_int8"]["max"] == 0  # and is gone as served
    assert results["dependence_float32_control"]["max"] == 0
    # bfloat16 (measured where the CPU computes it natively) still shares forwards:
    # padding moves it, by far less than a shared int8 forward moves int8.
    from prefix.model.dtype import resolve_dtype

    native = resolve_dtype("auto", "cpu")[0] == torch.bfloat16
    assert ("dependence_bfloat16" in results) == native
    if native:
        assert results["dependence_bfloat16"]["logit_max"] < 0.1
    for name in ("chunks_of_8", "one_row_each"):
        assert results[name]["n"] == 3 and results[name]["p50_ms"] > 0
    assert results["one_row_over_chunks_p50"] > 0
