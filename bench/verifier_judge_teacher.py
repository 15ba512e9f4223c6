"""Soft targets for the English cross-encoder from the 1.5B judge's cached scores.

bench/verifier_llm_judge.py scores pairs with Qwen2.5-Coder-1.5B-Instruct (P(yes))
and appends them to a cache file, one ``{"a", "b", "p"}`` per line; with
``--split train --seed S`` it scores exactly the training pairs that
``bench/train_verifier.py --seed S`` draws. Those scores then train the verifier as

    target = (1 - w) * label + w * judge(a, b)

(``bench/train_verifier.py --teacher-scores FILE --teacher-weight w``); pairs the
judge never scored keep their labels. On the eval split the judge ranks nearest
paraphrases against hard negatives about as well as the verifier (AUC 0.891
against 0.907 in English) and differently: the mean of the two logits ranks them at
0.929 (bench/results/verifier_llm_judge.json), which is what a teacher needs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

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
    if not scores:
        raise ValueError(f"no judge scores in {cache}: run bench/verifier_llm_judge.py first")
    return {
        (p.a, p.b): (1.0 - weight) * p.label + weight * scores[(p.a, p.b)]
        for p in pairs
        if (p.a, p.b) in scores
    }
