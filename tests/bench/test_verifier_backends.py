"""bench/verifier_backends.py end to end, shortened: every variant timed on real
pairs, the ratios and the score differences between the backends recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import verifier_backends
from tests.bench.bench_main import run_main
from validators.onnx_forward import MAX_LOGIT_DIFF

pytestmark = pytest.mark.slow


def test_bench_times_both_backends_and_records_their_agreement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["verifier_backends.py", "--calls", "3", "--name", "t"]
    run_main(verifier_backends.main, argv, tmp_path, monkeypatch)
    payload = json.loads((tmp_path / "t.json").read_text())
    results = payload["results"]
    for name in (
        "en_float32_torch",
        "en_float32_onnx",
        "en_int8_onnx",
        "zh_torch",
        "zh_onnx",
        "zh_onnx_int8",
    ):
        assert results[name]["n"] == 3 and results[name]["p50_ms"] > 0
    assert ("en_bfloat16_torch" in results) == payload["native_bfloat16"]
    for lang in ("en", "zh"):
        assert results[f"{lang}_onnx_over_torch_p50"] > 0
        # 3 calls x 5 candidates scored by both backends: probabilities agree.
        assert results[f"{lang}_max_score_difference"] <= MAX_LOGIT_DIFF / 4
        # int8 is another graph (its own calibration): its scores move, but not wildly.
        assert results[f"{lang}_int8_over_onnx_p50"] > 0
        assert 0 < results[f"{lang}_int8_max_score_difference"] < 0.9


def test_calls_beyond_the_questions_supply_run_as_many_as_there_are() -> None:
    assert verifier_backends.calls_to_run(60, [73, 73, 120]) == 60
    assert verifier_backends.calls_to_run(120, [73, 90]) == 73
    assert verifier_backends.calls_to_run(5, []) == 5
