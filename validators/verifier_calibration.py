"""Which calibration the pair verifier reads: one file per compute dtype.

Scores move with the dtype (bfloat16 by up to ~0.01, int8 by ~0.01 on average and
up to 0.8 on one calibration pair), so the cut for a target is read off scores
computed the way they are served. The files are written by bench/train_verifier.py
(``--calibrate-dtype``); the float32 one by every run. bfloat16 without its own
file falls back to the float32 cuts (off by its small drift); int8 does not: its
drift is the size of the margins the cuts keep, so the verifier refuses to load.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from validators.verifier_dtype import Dtype
from validators.verifier_errors import VerifierCalibrationError

log = logging.getLogger("cachegate.validators.verifier")

#: The calibration file each compute dtype reads.
CALIBRATION_FILES: dict[Dtype, str] = {
    "float32": "calibration.json",
    "bfloat16": "calibration_bfloat16.json",
    "int8": "calibration_int8.json",
}

#: Dtypes whose scores drift too far for the float32 cuts to stand in for their own.
NO_FALLBACK: frozenset[Dtype] = frozenset({"int8"})


def read_calibration(
    model_dir: Path, dtype: Dtype, weights_sha256: str
) -> tuple[dict[str, Any], Dtype]:
    """The calibration for ``dtype`` and the dtype it was computed in.

    A dtype without its own calibration (missing, or made for other weights)
    falls back to the float32 one, with a warning: its cuts are then off by the
    dtype's score drift (bfloat16: up to ~0.01), not wrong by more. A dtype in
    :data:`NO_FALLBACK` raises ``ValueError`` instead."""
    path = model_dir / CALIBRATION_FILES[dtype]
    if dtype != "float32":
        if dtype in NO_FALLBACK:
            own = json.loads(path.read_text()) if path.exists() else {}
            negatives = own.get("negatives")
            scored = isinstance(negatives, dict) and bool(negatives.get("en"))
            mine = own.get("weights_sha256") == weights_sha256 and own.get("dtype") == dtype
            if not (mine and scored):
                raise ValueError(
                    f"no {dtype} calibration of these weights ({path.name}; "
                    f"bench/train_verifier.py --skip-training --calibrate-dtype {dtype})"
                )
            return own, dtype
        if not path.exists():
            log.warning(
                "verifier: no %s calibration (%s); the %s cuts come from the float32 "
                "one (bench/train_verifier.py --skip-training --calibrate-dtype %s)",
                dtype,
                path.name,
                dtype,
                dtype,
            )
        else:
            own = json.loads(path.read_text())
            # Calibration of other weights is stale (a retraining without
            # recalibrating this dtype): the float32 one is rewritten by every run.
            mine = own.get("weights_sha256") == weights_sha256
            if mine and own.get("dtype") == dtype:
                return own, dtype
            log.warning(
                "verifier: %s was made for other weights or another dtype; the %s "
                "cuts come from the float32 calibration",
                path.name,
                dtype,
            )
    return json.loads((model_dir / CALIBRATION_FILES["float32"]).read_text()), "float32"


def cut_for(calibration: dict[str, Any], target_misfire_rate: float) -> float:
    """The lowest cut at which at most ``target_misfire_rate`` of the calibration
    negatives score above it, in every language."""
    t = target_misfire_rate
    if not isinstance(t, int | float) or not math.isfinite(t) or not 0.0 < t < 1.0:
        raise VerifierCalibrationError("target misfire rate must be a number in (0, 1)")
    return max(_cut(np.asarray(scores), float(t)) for scores in calibration["negatives"].values())


def kept_at(calibration: dict[str, Any], cut: float, lang: str) -> float:
    """Fraction of the calibration positives of ``lang`` scored above ``cut``."""
    positives = np.asarray(calibration["positives"][lang])
    return float((positives > cut).mean()) if len(positives) else 0.0


def _cut(negatives: np.ndarray, target: float) -> float:
    """Smallest cut with (negatives > cut).mean() <= target."""
    if len(negatives) == 0:
        return 1.0
    allowed = math.floor(target * len(negatives))  # how many negatives may lie above
    ordered = np.sort(negatives)[::-1]
    return float(ordered[allowed]) if allowed < len(ordered) else 0.0
