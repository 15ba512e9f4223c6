"""Soft targets for the cross-encoders from the 1.5B judge's cached scores.

bench/verifier_llm_judge.py scores pairs with Qwen2.5-Coder-1.5B-Instruct (P(yes))
and appends them to a cache file, one ``{"a", "b", "p"}`` per line; with
``--split train --seed S`` it scores exactly the training pairs that
``bench/train_verifier.py --seed S`` draws (with the same ``--cap``s; training warns
when the judge scored pairs its sample lacks). Those scores then train the verifier as

    target = (1 - w) * label + w * calibrated(judge(a, b))

(``bench/train_verifier.py --teacher-scores FILE --teacher-weight w``); pairs the
judge never scored keep their labels. The judge leans to "yes" (the median hard
negative of the training split gets P(yes) 0.53), so its raw P(yes) would pull every
negative up; ``calibrated`` is a logistic map of its logit fitted to the labels of
the same training pairs (Platt scaling), which keeps the judge's ranking and puts it
on the labels' scale. On the eval split the judge ranks nearest
paraphrases against hard negatives about as well as the verifier (AUC 0.891
against 0.907 in English) and differently: the mean of the two logits ranks them at
0.929 (bench/results/verifier_llm_judge.json). As a teacher it did not move the
calibrated pipeline (session 32, README levers list), so the shipped recipe has none.
The Chinese trainer takes the same targets (``bench/train_verifier_zh.py --judge-scores
--judge-weight``, scores from ``--split train-zh``); on the questions written in
Chinese, where the judge ranks held-out pairs far better than the cross-encoder, it
taught nothing beyond what one more epoch on the labels did (session 33,
bench/results/verifier_zh_trial_s33.json).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from bench.verifier_pairs import VPair


def load_cache(path: Path) -> dict[tuple[str, str], float]:
    """``(a, b) -> P(yes)`` of every pair in the cache file (none when it is missing)."""
    out: dict[tuple[str, str], float] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out[(row["a"], row["b"])] = float(row["p"])
    return out


def judge_targets(
    pairs: Sequence[VPair], cache: Path, weight: float
) -> dict[tuple[str, str], float]:
    """``(a, b) -> target`` for each of ``pairs`` the judge scored; weight 0: none."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"teacher weight must be in [0, 1], got {weight}")
    if weight == 0.0:
        return {}
    scores = load_cache(cache)
    judged = [p for p in pairs if (p.a, p.b) in scores]
    labels: dict[tuple[str, str], int] = {}
    for p in judged:  # targets are keyed by text: one key, one label
        if labels.setdefault((p.a, p.b), p.label) != p.label:
            raise ValueError("two training pairs share their texts but not their label")
    if not judged:
        raise ValueError(
            f"no judge scores of these pairs in {cache}: run bench/verifier_llm_judge.py"
        )
    mapped = platt([scores[(p.a, p.b)] for p in judged], [p.label for p in judged])
    return {
        (p.a, p.b): (1.0 - weight) * p.label + weight * m
        for p, m in zip(judged, mapped, strict=True)
    }


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def platt(scores: Sequence[float], labels: Sequence[int]) -> list[float]:
    """``scores`` mapped by the logistic curve of their logit that best fits ``labels``
    (monotone: the order of the scores is kept). Needs both labels among them."""
    if len(set(labels)) < 2:
        raise ValueError("calibrating the judge needs positive and negative pairs")
    x = np.array([[_logit(s)] for s in scores])
    fit = LogisticRegression(C=1e6).fit(x, np.array(labels))
    return [float(v) for v in fit.predict_proba(x)[:, 1]]
