"""bench/verifier_int8_rows.py end to end, shortened: a shared int8 forward moves a
pair's score, one row per forward (as served) and float32 do not; both ways timed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import bench._common
from bench import verifier_int8_rows

pytestmark = pytest.mark.slow


def test_bench_measures_the_dependence_and_times_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench._common, "RESULTS", tmp_path)
    argv = ["verifier_int8_rows.py", "--calls", "3", "--pairs", "8"]
    monkeypatch.setattr(sys, "argv", argv)
    threads = torch.get_num_threads()
    try:
        verifier_int8_rows.main()
    finally:
        torch.set_num_threads(threads)  # main() runs the bench on one thread
    results = json.loads((tmp_path / "verifier_int8_rows.json").read_text())["results"]
    assert results["int8_forward_chunk"] == 1
    assert results["dependence_shared_forward_int8"]["mean"] > 0  # the effect exists
    assert results["dependence_served_int8"]["max"] == 0  # and is gone as served
    assert results["dependence_float32_control"]["max"] == 0
    for name in ("chunks_of_8", "one_row_each"):
        assert results[name]["n"] == 3 and results[name]["p50_ms"] > 0
    assert results["one_row_over_chunks_p50"] > 0
