"""The opt-in bfloat16 verifier (validators/verifier_dtype.py): its scores stay close
to the float32 ones the calibration was made with, and it decides the recorded
fixtures the same way at the default cut."""

from __future__ import annotations

import json

import pytest

from validators.verifier import MODEL_DIR, PairVerifier
from validators.verifier_dtype import BF16Linear, apply_dtype

pytestmark = pytest.mark.slow


def test_an_unknown_dtype_is_refused() -> None:
    import torch

    with pytest.raises(ValueError):
        apply_dtype(torch.nn.Linear(2, 2), "int8")  # type: ignore[arg-type]


def test_bfloat16_scores_stay_close_and_decide_the_fixtures_alike() -> None:
    fp32 = PairVerifier(cache_size=0, zh=False)
    bf16 = PairVerifier(cache_size=0, zh=False, dtype="bfloat16")
    assert any(isinstance(m, BF16Linear) for m in bf16.model.modules())
    assert fp32.model_id != bf16.model_id  # verdicts of one never answer for the other
    cut = fp32.cut_for(0.01)
    fixtures = json.loads((MODEL_DIR / "fixtures.json").read_text(encoding="utf-8"))
    rows = [r for r in fixtures if r["path"] == "en" and r["supported"]]
    assert rows
    for row in rows:
        a = fp32.score(row["query"], [row["cached"]])[0]
        b = bf16.score(row["query"], [row["cached"]])[0]
        assert b == pytest.approx(a, abs=0.02), (row["query"], row["cached"])
        assert (a > cut) == (b > cut)
