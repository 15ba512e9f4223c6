"""The Chinese head, the common score scale and the calibration curve of the verifier.

- ``fit_zh_head``: logistic regression over ``validators.verifier_zh.features``
  of the Chinese training pairs.
- ``common_scale``: a monotone map from the Chinese head's probabilities onto the
  English cross-encoder's scale, matching the quantiles of the two languages'
  calibration negatives, so that one cut gives one misfire rate in both.
- ``calibration``: for the calibration split, every negative's and positive's
  score per language (``PairVerifier.cut_for`` reads the cut off the negatives)
  and a table of cut, misfire rate and positives kept for a few targets.

Negatives of kind ``unrelated`` are left out of the calibration: random pairs
are easy, and counting them would make every misfire rate look smaller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from bench.verifier_pairs import VPair
from validators import verifier_zh

TARGETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
CALIBRATION_EXCLUDED = ("unrelated",)


def fit_zh_head(pairs: Sequence[VPair], e5: verifier_zh.E5Vectors) -> verifier_zh.ChineseHead:
    texts = sorted({t for p in pairs for t in (p.a, p.b)})
    row = {t: i for i, t in enumerate(texts)}
    vectors = e5.embed(texts)  # (distinct texts, 384)
    x = np.asarray(
        [
            verifier_zh.features(p.a, p.b, float(vectors[row[p.a]] @ vectors[row[p.b]]))
            for p in pairs
        ]
    )
    y = np.asarray([p.label for p in pairs])
    mean, std = x.mean(axis=0), np.maximum(x.std(axis=0), 1e-6)
    model = LogisticRegression(C=1.0, max_iter=2000, class_weight="balanced")
    model.fit((x - mean) / std, y)
    return verifier_zh.ChineseHead(
        mean.tolist(), std.tolist(), model.coef_[0].tolist(), float(model.intercept_[0])
    )


def common_scale(
    zh_negatives: Sequence[float], en_negatives: Sequence[float]
) -> dict[str, list[float]]:
    """Knots (x: Chinese probability, y: English-scale score) of a piecewise-linear
    map; denser near the top, where the cuts are."""
    probs = np.unique(
        np.concatenate(
            [np.linspace(0, 0.9, 46), np.linspace(0.9, 0.99, 46), np.linspace(0.99, 1.0, 21)]
        )
    )
    x = np.quantile(np.asarray(zh_negatives), probs)
    y = np.quantile(np.asarray(en_negatives), probs)
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
