"""bench/engine_cuda_check.py, dry-run on the CPU: every variant and dtype is checked,
reuse is exact, and a broken comparison is reported, not passed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench import engine_cuda_check
from tests.prefix.tiny_models import VARIANTS


def test_dry_run_on_the_cpu_checks_every_variant_in_both_dtypes(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    assert engine_cuda_check.main(["--device", "cpu", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    rows = result["checks"]
    assert {(r["variant"], r["dtype"]) for r in rows} == {
        (v, d) for v in VARIANTS for d in ("float32", "bfloat16")
    }
    assert result["all_ok"] and all(r["ok"] and r["cached_tokens"] == 16 for r in rows)
    assert all(r["batched_equals_alone"] for r in rows)
    assert max(r["max_diff_cached_vs_full"] for r in rows if r["dtype"] == "float32") < 1e-4


def test_a_failing_check_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a tolerance no real difference meets: the run must say so and exit non-zero
    strict = {dtype: {"cached": -1.0, "cpu": -1.0} for dtype in (torch.float32, torch.bfloat16)}
    monkeypatch.setattr(engine_cuda_check, "TOLERANCE", strict)
    monkeypatch.setattr(engine_cuda_check, "VARIANTS", ["llama"])
    out = tmp_path / "check.json"
    assert engine_cuda_check.main(["--device", "cpu", "--out", str(out)]) == 1
    result = json.loads(out.read_text())
    assert not result["all_ok"] and not any(r["ok"] for r in result["checks"])


def test_batching_that_changes_the_output_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_cuda_check, "_batched", lambda *_: [[1], [2]])
    monkeypatch.setattr(engine_cuda_check, "VARIANTS", ["llama"])
    out = tmp_path / "check.json"
    assert engine_cuda_check.main(["--device", "cpu", "--out", str(out)]) == 1
    rows = json.loads(out.read_text())["checks"]
    assert [r["batched_equals_alone"] for r in rows] == [False, False]
    assert not any(r["ok"] for r in rows)
