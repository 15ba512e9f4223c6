"""The common score scale and the calibration curve of the verifier (the Chinese
cross-encoder is trained by bench/train_verifier_zh.py).

- ``common_scale``: a monotone map from the Chinese cross-encoder's probabilities onto the
  English cross-encoder's scale, matching the quantiles of the two languages'
  calibration negatives, so that one cut gives one misfire rate in both.
- ``calibration``: for the calibration split, every negative's and positive's
  score per language (``PairVerifier.cut_for`` reads the cut off the negatives)
  and a table of cut, misfire rate and positives kept for a few targets.
- ``calibrate``: score the calibration pairs (bench/verifier_cal_sample.py chooses
  them) in a dtype and write its file (float32
  also fits ``common_scale``); ``float32_beside``: the float32 calibration to compare
  another dtype's with (both run by bench/train_verifier.py).
- ``dtype_card_section`` / ``put_card_section``: the model card's section on a
  calibration in another compute dtype (bfloat16), compared with the float32 one.

Negatives of kind ``unrelated`` are left out of the calibration: random pairs
are easy, and counting them would make every misfire rate look smaller.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.verifier_pairs import VPair
from validators import verifier_zh_encoder
from validators.verifier import CALIBRATION_FILES, PairVerifier, Verdict
from validators.verifier_dtype import Dtype

TARGETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
CALIBRATION_EXCLUDED = ("unrelated",)
#: Calibration pairs per (language, kind, label) that the calibration keeps
#: (bench/verifier_cal_sample.py thins larger groups to this many).
CAL_CAP = 500


def common_scale(
    zh_negatives: Sequence[float], en_negatives: Sequence[float]
) -> dict[str, list[float]]:
    """Knots (x: Chinese probability, y: English-scale score) of a piecewise-linear
    map; denser near the top, where the cuts are.

    Knots pair order statistics, not interpolated quantiles (until session 28): for a
    share q of negatives, the Chinese negative a cut at q would sit on (:func:`_cut`)
    maps onto the English one. At every calibrated target the two languages' cuts then
    land on one score, so the shared cut (the higher of the two) cannot be raised by
    where an interpolated Chinese quantile falls between two English negatives
    (tests/bench/test_verifier_calibrate.py shows it happen on the old knots)."""
    tops = np.unique(
        np.concatenate(
            [
                np.linspace(0.0, 0.01, 21),
                np.linspace(0.01, 0.1, 46),
                np.linspace(0.1, 1.0, 46),
                np.asarray(TARGETS),
            ]
        )
    )
    zh, en = np.asarray(zh_negatives), np.asarray(en_negatives)
    x = np.asarray([_cut(zh, q) for q in tops])[::-1]
    y = np.asarray([_cut(en, q) for q in tops])[::-1]
    x = np.concatenate([[0.0], x, [1.0]])
    y = np.concatenate([[0.0], y, [1.0]])
    # np.interp needs strictly increasing knots; ties among negatives would break that.
    eps = 1e-9 * np.arange(len(x))
    x = np.maximum.accumulate(np.clip(x, 0.0, 1.0)) + eps
    y = np.maximum.accumulate(np.clip(y, 0.0, 1.0))
    return {"x": x.tolist(), "y": y.tolist()}


def _cut(negatives: np.ndarray, target: float) -> float:
    allowed = int(np.floor(target * len(negatives)))
    ordered = np.sort(negatives)[::-1]
    return float(ordered[allowed]) if allowed < len(ordered) else 0.0


def calibration(
    pairs: Sequence[VPair], scores: Sequence[float], supported: Sequence[bool]
) -> dict[str, Any]:
    by: dict[str, dict[str, list[float]]] = {"negatives": {}, "positives": {}}
    for p, s, ok in zip(pairs, scores, supported, strict=True):
        if p.kind in CALIBRATION_EXCLUDED:
            continue
        side = "positives" if p.label else "negatives"
        # An unsupported pair scores 0 and is never served; it still counts as a
        # positive lost, and as a negative that did not misfire.
        by[side].setdefault(p.lang, []).append(round(float(s) if ok else 0.0, 6))
    table = []
    for t in TARGETS:
        cut = max(_cut(np.asarray(v), t) for v in by["negatives"].values())
        row: dict[str, float] = {"target_misfire_rate": t, "cut": round(cut, 6)}
        for lang in sorted(by["negatives"]):
            neg = np.asarray(by["negatives"][lang])
            pos = np.asarray(by["positives"].get(lang, []))
            row[f"misfire_{lang}"] = round(float((neg > cut).mean()), 5)
            row[f"kept_{lang}"] = round(float((pos > cut).mean()) if len(pos) else 0.0, 5)
        table.append(row)
    return {
        "about": "scores of the calibration split (never trained on); cut_for(t) is the lowest "
        "cut with at most t of the negatives above it, in every language",
        "negative_kinds_excluded": list(CALIBRATION_EXCLUDED),
        "counts": {side: {k: len(v) for k, v in d.items()} for side, d in by.items()},
        "table": table,
        "negatives": by["negatives"],
        "positives": by["positives"],
    }


def score_pairs(
    verifier: PairVerifier, pairs: Sequence[VPair], batch: int = 64, desc: str | None = None
) -> list[Verdict]:
    """The verifier's verdict on each pair, in order (batches bound the memory; with
    ``desc``, a progress bar on stderr)."""
    from tqdm import tqdm

    verdicts: list[Verdict] = []
    with tqdm(total=len(pairs), desc=desc, unit="pair", disable=desc is None) as bar:
        for lo in range(0, len(pairs), batch):
            chunk = pairs[lo : lo + batch]
            verdicts += verifier.verdicts_for_pairs([(p.a, p.b) for p in chunk])
            bar.update(len(chunk))
    return verdicts


def pairs_sha256(pairs: Sequence[VPair]) -> str:
    """Which pairs, in which order, a calibration scored: two calibrations compare pair by
    pair only when this matches (data/verifier/pairs.jsonl is rebuilt with an embedder's
    nearest neighbours, not bit for bit the same each time)."""
    digest = hashlib.sha256()
    for p in pairs:
        row = [p.a, p.b, p.label, p.kind, p.lang, p.split]
        digest.update(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def identified(
    result: dict[str, Any], verifier: PairVerifier, pairs: Sequence[VPair]
) -> dict[str, Any]:
    """``result`` with what it was scored by and on: ``PairVerifier`` reads another
    dtype's cuts only off a calibration of its own weights and dtype."""
    return {
        "dtype": verifier.dtype,
        "weights_sha256": verifier.meta["weights_sha256"],
        "pairs_sha256": pairs_sha256(pairs),
        **result,
    }


def _flat(cal: dict[str, Any]) -> np.ndarray:
    """Every score of a calibration, in one fixed order (side, language, pair)."""
    return np.asarray(
        [
            s
            for side in ("negatives", "positives")
            for lang in sorted(cal[side])
            for s in cal[side][lang]
        ]
    )


def _cuts(cal: dict[str, Any]) -> dict[float, float]:
    return {r["target_misfire_rate"]: r["cut"] for r in cal["table"]}


def dtype_card_section(
    base: dict[str, Any], other: dict[str, Any], dtype: Dtype, shipped: dict[str, Any]
) -> str:
    """The model card's section on ``other`` (the calibration pairs scored in ``dtype``)
    beside ``base`` (the same pairs in float32): score drift and the cut per target,
    with the cuts of ``shipped`` (calibration.json) where it scored other pairs."""
    if base.get("pairs_sha256") != other["pairs_sha256"]:
        raise ValueError(f"the {dtype} and float32 calibrations scored different pairs")
    a, b = _flat(base), _flat(other)
    drift = np.abs(a - b)
    cut_a, cut_b, cut_s = _cuts(base), _cuts(other), _cuts(shipped)
    flipped = int(((a > cut_a[0.01]) != (b > cut_b[0.01])).sum())
    same = shipped.get("pairs_sha256") == other["pairs_sha256"]
    langs = sorted(other["negatives"])
    head = " | ".join(f"misfire_{x} | kept_{x}" for x in langs)
    first = "| target misfire | " + ("" if same else "cut `calibration.json` | ")
    rows = [
        f"| {t} | "
        + ("" if same else f"{cut_s[t]:.4f} | ")
        + f"{cut_a[t]:.4f} | {r['cut']:.4f} | "
        + " | ".join(f"{r[f'misfire_{x}']:.3f} | {r[f'kept_{x}']:.3f}" for x in langs)
        + " |"
        for r in other["table"]
        for t in [r["target_misfire_rate"]]
    ]
    note = (
        []
        if same
        else [
            "",
            "`calibration.json` was written from an earlier build of",
            "`data/verifier/pairs.jsonl` (rebuilt from nearest neighbours, not bit for bit",
            "the same), so its pairs are not these: the float32 column beside the",
            f"{dtype} one scores these pairs in float32 (for this comparison only), and the",
            "first column is the float32 cut in force, on its own pairs.",
        ]
    )
    return "\n".join(
        [
            f"## {dtype} calibration (`{CALIBRATION_FILES[dtype]}`)",
            "",
            f"The calibration split scored with the encoder's matrix products in {dtype}",
            "(`validators/verifier_dtype.py`); `PairVerifier(dtype=...)` reads its cuts off",
            "this file, so the cut for a target is right for the dtype served. Written by",
            f"`python bench/train_verifier.py --skip-training --calibrate-dtype {dtype}`.",
            f"Over the {len(a)} calibration scores, the largest change from float32 is",
            f"{drift.max():.4f} (mean {drift.mean():.4f}); {flipped} decisions differ between",
            "the two 1% cuts. Chinese scores do not change (the Chinese cross-encoder runs",
            "in float32 whatever the dtype), and its map onto the English scale",
            "(`zh_encoder.json`) stays",
            "the one fitted to float32 English negatives: `cut_for` takes the highest of",
            "each language's own cut on the scores as served, so the misfire bound holds in",
            "both languages; the map only decides which language sets the cut.",
            *note,
            "",
            first + f"cut float32 | cut {dtype} | {head} |",
            "|" + "---|" * ((3 if same else 4) + 2 * len(langs)),
            *rows,
            "",
        ]
    )


def put_card_section(card: Path, section: str) -> None:
    """Replace the card's section with ``section``'s heading (up to the next ``## ``
    heading), or add it before "How to retrain" (at the end without one)."""
    text = card.read_text(encoding="utf-8")
    heading = section.splitlines()[0]
    start = text.find(heading + "\n")
    if start >= 0:
        after = re.search(r"^## ", text[start + len(heading) :], flags=re.M)
        end = start + len(heading) + after.start() if after else len(text)
        text = text[:start] + section + "\n" + text[end:]
    else:
        at = text.find("## How to retrain")
        at = at if at >= 0 else len(text)
        text = text[:at] + section + "\n" + text[at:]
    card.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


def calibrate(cal: Sequence[VPair], model_dir: Path, dtype: Dtype = "float32") -> dict[str, object]:
    """Score the calibration pairs ``cal`` (bench/verifier_cal_sample.py chooses them)
    in ``dtype`` and write its calibration file.

    float32 also fits the Chinese scores' map onto the English scale (zh_encoder.json).
    Another dtype keeps that map: the Chinese cross-encoder runs in float32 whatever
    the dtype, so its scores do not move, and ``cut_for`` takes each language's own
    cut on the scores as served, so the bound holds in both languages whichever sets
    the cut."""
    zh_meta = model_dir / verifier_zh_encoder.META_FILE
    if dtype == "float32" and zh_meta.exists():
        # The map is fitted to raw Chinese scores, not mapped ones.
        meta = json.loads(zh_meta.read_text())
        meta["to_common_scale"] = {"x": [0.0, 1.0], "y": [0.0, 1.0]}
        zh_meta.write_text(json.dumps(meta, indent=2) + "\n")
    own = model_dir / CALIBRATION_FILES[dtype]
    # Scoring needs no cuts: an empty calibration in memory stands in (the file may not
    # exist yet, and int8 refuses to load without its own), so nothing half-made is
    # ever on disk for the gateway to read.
    empty: dict[str, Any] = {"negatives": {}, "positives": {}}
    verifier = PairVerifier(model_dir, dtype=dtype, calibration=empty)
    verdicts = score_pairs(verifier, cal, desc=f"calibration ({dtype})")
    if dtype == "float32" and verifier.zh_model_file is not None:
        kept = [i for i, p in enumerate(cal) if p.kind not in CALIBRATION_EXCLUDED and not p.label]
        en_neg = [verdicts[i].score for i in kept if verdicts[i].path == "en"]
        zh_neg = [verdicts[i].score for i in kept if verdicts[i].path == "zh"]
        meta = json.loads(verifier.zh_model_file.read_text())
        meta["to_common_scale"] = common_scale(zh_neg, en_neg)
        verifier.zh_model_file.write_text(json.dumps(meta, indent=2) + "\n")
        verifier = PairVerifier(model_dir, calibration=empty)
        zh_idx = [i for i, v in enumerate(verdicts) if v.path == "zh"]
        mapped = verifier.verdicts_for_pairs([(cal[i].a, cal[i].b) for i in zh_idx])
        for i, v in zip(zh_idx, mapped, strict=True):
            verdicts[i] = v
    result = calibration(cal, [v.score for v in verdicts], [v.supported for v in verdicts])
    result = identified(result, verifier, cal)
    # Written whole or not at all: the gateway reads this file at start.
    partial = own.with_name(own.name + ".partial")
    partial.write_text(json.dumps(result) + "\n")
    os.replace(partial, own)
    return result


def float32_beside(cal: Sequence[VPair], model_dir: Path, other: dict[str, Any]) -> dict[str, Any]:
    """The float32 calibration of the pairs ``cal`` that ``other`` scored:
    calibration.json when it scored them, else they are scored in float32 now (for
    comparison; not written)."""
    shipped: dict[str, Any] = json.loads((model_dir / CALIBRATION_FILES["float32"]).read_text())
    if shipped.get("pairs_sha256") == other["pairs_sha256"]:
        return shipped
    verifier = PairVerifier(model_dir)
    verdicts = score_pairs(verifier, cal, desc="calibration (float32, for comparison)")
    result = calibration(cal, [v.score for v in verdicts], [v.supported for v in verdicts])
    return identified(result, verifier, cal)
