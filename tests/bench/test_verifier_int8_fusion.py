"""bench/verifier_int8_fusion.py end to end, shortened: both languages' int8 graphs
timed fused and as served on real lookups, beside float32, with their differences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import verifier_int8_fusion
from tests.bench.bench_main import run_main
from validators.onnx_quantize import MAX_INT8_LOGIT_DIFF

pytestmark = pytest.mark.slow


def test_bench_times_both_sessions_and_records_their_differences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["verifier_int8_fusion.py", "--calls", "3", "--rounds", "1"]
    run_main(verifier_int8_fusion.main, argv, tmp_path, monkeypatch)
    payload = json.loads((tmp_path / "verifier_int8_fusion.json").read_text())
    assert payload["disabled_optimizers"] == ["SkipLayerNormFusion"]
    for lang in ("en", "zh"):
        r = payload["results"][lang]
        assert r["pairs"] == 15  # 3 lookups of 5 candidates
        # English int8 runs each pair alone (validators/verifier_en.py), Chinese a lookup
        assert r["forwards"] == (15 if lang == "en" else 3)
        for name in ("fused", "served", "float32"):
            assert r[name]["n"] == 3 and r[name]["p50_ms"] > 0
        d = r["logit_difference"]
        # The rewrite really changes the int8 graph (a control that it was applied) ...
        assert d["served_vs_fused"]["max"] > 0
        # ... and neither session strays from float32 beyond int8's own sanity bound.
        for key in ("fused_vs_float32", "served_vs_float32"):
            assert 0 < d[key]["max"] < MAX_INT8_LOGIT_DIFF
    # The bench's hooks are gone: the verifier's own functions are back.
    from validators import onnx_forward, onnx_quantize

    assert onnx_forward.quantize_int8 is onnx_quantize.quantize_int8
    assert onnx_forward.OnnxForward.__call__.__qualname__ == "OnnxForward.__call__"
