"""Soft targets for the Chinese cross-encoder from the English verifier (a teacher).

The Chinese intent pairs are translations: each Chinese question keeps its English
original (bench/data/zh_intent_questions.jsonl). The intent labels are coarse (two
questions filed under one intent need not have the same answer, and the nearest
question of another intent sometimes does), and the shipped English verifier ranks
the English pairs better than the Chinese model ranks their translations (AUC 0.93
against 0.86 on the eval splits). So a Chinese intent pair can learn from the
English verifier's score of its originals:

    target = (1 - w) * label + w * teacher(English a, English b)

Only the intent kinds get a teacher (``paraphrase``, ``paraphrase_random``,
``hard``, ``unrelated``): the rewrites (entity, polarity, direction, word order,
surface) are made from the Chinese text itself, so their English originals would
be the same question, and PAWS-X zh has no originals here. The teacher never sees
the calibration or evaluation splits' pairs: only training pairs are scored.

Measured in session 15 (README, "The pair verifier on the hit path"): at weight 0.5
it did no better than the same run on labels alone, so the shipped model has none.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from bench.verifier_pairs import VPair
from bench.verifier_pairs_zh import ZhQuestion, load_zh_questions

TAUGHT_KINDS = frozenset({"paraphrase", "paraphrase_random", "hard", "unrelated"})
#: Scores pairs of English questions, in order (the English verifier's path).
Teacher = Callable[[Sequence[tuple[str, str]]], list[float]]


def english_originals(questions: Sequence[ZhQuestion]) -> dict[str, str]:
    """Chinese text -> its English original (the first, where two translate alike)."""
    out: dict[str, str] = {}
    for q in questions:
        out.setdefault(q.zh, q.en)
    return out


def taught(pairs: Sequence[VPair], originals: dict[str, str]) -> list[VPair]:
    """The training pairs a teacher can score: Chinese intent pairs of known originals."""
    return [
        p
        for p in pairs
        if p.lang == "zh"
        and p.split == "train"
        and p.kind in TAUGHT_KINDS
        and p.a in originals
        and p.b in originals
    ]


def soft_targets(
    pairs: Sequence[VPair],
    teacher: Teacher,
    weight: float,
    originals: dict[str, str] | None = None,
    chunk: int = 64,
) -> dict[tuple[str, str], float]:
    """``(a, b) -> target`` for every pair the teacher can score (the rest keep their
    labels); ``weight`` 0 returns nothing."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"teacher weight must be in [0, 1], got {weight}")
    if weight == 0.0:
        return {}
    originals = english_originals(load_zh_questions()) if originals is None else originals
    chosen = taught(pairs, originals)
    out: dict[tuple[str, str], float] = {}
    for lo in range(0, len(chosen), chunk):
        batch = chosen[lo : lo + chunk]
        scores = teacher([(originals[p.a], originals[p.b]) for p in batch])
        for p, s in zip(batch, scores, strict=True):
            out[(p.a, p.b)] = (1.0 - weight) * p.label + weight * float(s)
        print(f"teacher: {len(out)}/{len(chosen)}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    return out


def english_teacher(threads: int = 1) -> Teacher:
    """The shipped verifier's English path, in float32 (no verdict cache)."""
    from validators.verifier import MODEL_DIR, PairVerifier

    model = PairVerifier(MODEL_DIR, threads=threads, zh=False, cache_size=0, dtype="float32")

    def score(pairs: Sequence[tuple[str, str]]) -> list[float]:
        return [v.score if v.supported else 0.0 for v in model.verdicts_for_pairs(list(pairs))]

    return score
