"""The int8 Chinese verifier's calibration (validators/onnx_quantize.py).

The int8 graph's probabilities differ from the float32 ones (by 0.04 on average),
so it gets what the float32 graph got at calibration, from its own scores on the
same calibration split: a map onto the English scale (quantiles of its negatives
matched to the English negatives', ``verifier_calibrate.common_scale``) and the
mapped scores of the Chinese negatives and positives, which ``PairVerifier`` puts
in place of the float32 ones when ``zh_precision="int8"``. Written into
``zh_encoder.json`` under ``int8``, with the checksums of both weights it fits.

    python bench/train_verifier.py --skip-training --calibrate-zh-int8
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import verifier_calibrate as calib
from bench.verifier_pairs import VPair
from validators import verifier_zh_encoder
from validators.verifier import CALIBRATION_FILES


def calibrate_zh_int8(calibration_pairs: Sequence[VPair], model_dir: Path) -> dict[str, Any]:
    """Score the Chinese calibration pairs (of those bench/verifier_cal_sample.py chose)
    with the int8 graph; write and return the block."""
    cal = [p for p in calibration_pairs if p.lang == "zh"]
    float32 = json.loads((model_dir / CALIBRATION_FILES["float32"]).read_text())
    en_negatives = float32["negatives"]["en"]  # float32 English scores of the same split
    encoder = verifier_zh_encoder.ChineseEncoder(model_dir, precision="int8")
    print(f"calibration (Chinese, int8): scoring {len(cal)} pairs", file=sys.stderr)
    raw: list[float | None] = []
    for lo in range(0, len(cal), 64):
        raw += encoder.score([(p.a, p.b) for p in cal[lo : lo + 64]])
    negatives = [
        r
        for p, r in zip(cal, raw, strict=True)
        if r is not None and not p.label and p.kind not in calib.CALIBRATION_EXCLUDED
    ]
    scale = calib.common_scale(negatives, en_negatives)
    mapped = [0.0 if r is None else float(np.interp(r, scale["x"], scale["y"])) for r in raw]
    result = calib.calibration(cal, mapped, [r is not None for r in raw])
    meta_path = model_dir / verifier_zh_encoder.META_FILE
    meta = json.loads(meta_path.read_text())
    en_meta = json.loads((model_dir / "verifier.json").read_text())
    block = {
        "about": "the int8 graph's own map onto the English scale and its mapped scores of "
        "the Chinese calibration pairs (bench/verifier_calibrate_int8.py)",
        "weights_sha256": meta["weights_sha256"],
        "en_weights_sha256": en_meta["weights_sha256"],
        "pairs_sha256": calib.pairs_sha256(cal),
        "to_common_scale": scale,
        "table": result["table"],
        "negatives": result["negatives"]["zh"],
        "positives": result["positives"]["zh"],
    }
    meta["int8"] = block
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return block


def card_section(block: dict[str, Any], float32: dict[str, Any]) -> str:
    """The model card's section: the Chinese pairs alone, each graph at its own cut."""
    rows = [
        "## Chinese verifier in int8 (`CACHEGATE_VERIFIER_ZH_PRECISION`)",
        "",
        "The Chinese cross-encoder's products in int8 (ONNX Runtime dynamic quantization, "
        "weights per channel; validators/onnx_quantize.py), calibrated on its own scores of "
        "the same calibration split (bench/verifier_calibrate_int8.py). Chinese pairs "
        "alone, each graph at the cut its own negatives give (the served cut is the higher "
        "of this and the English one):",
        "",
        "| target misfire | int8 cut | int8 kept | float32 cut | float32 kept |",
        "|---|---|---|---|---|",
    ]
    neg32 = np.asarray(float32["negatives"]["zh"])
    pos32 = np.asarray(float32["positives"]["zh"])
    neg8, pos8 = np.asarray(block["negatives"]), np.asarray(block["positives"])
    for t in calib.TARGETS:
        cut8, cut32 = calib._cut(neg8, t), calib._cut(neg32, t)
        rows.append(
            f"| {t} | {cut8:.4f} | {float((pos8 > cut8).mean()):.4f} | {cut32:.4f} | "
            f"{float((pos32 > cut32).mean()):.4f} |"
        )
    return "\n".join(rows) + "\n"
