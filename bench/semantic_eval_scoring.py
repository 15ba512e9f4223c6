"""Scoring of the semantic-cache pairs and the choice of the default threshold.

A pair's score is the cosine of its two questions; ``Scored`` keeps one kind's
scores and validator verdicts (per mode: ``raw``, ``validators``, ``all_guards``),
``curves`` gives hit / misfire rates per threshold, ``choose`` picks the default
threshold by the goals and ``bootstrap_choice`` measures how stable that pick is.
See bench/semantic_eval.py.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.semantic_data import ENTITY, HARD, NEGATIVE_KINDS, POSITIVE, Pair
from validators import GUARDS, Validator

THRESHOLDS = [round(0.70 + 0.01 * i, 2) for i in range(30)]
MODES = ("raw", "validators", "all_guards")
GOAL_MISFIRE = 0.01
GOAL_POSITIVES = 0.60


def wilson_upper(k: int, n: int, z: float = 1.96) -> float:
    """Upper end of the 95% Wilson interval of a rate k/n."""
    if n == 0:
        return float("nan")
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def wilson_lower(k: int, n: int, z: float = 1.96) -> float:
    if n == 0:
        return float("nan")
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))


class Scored:
    """Scores and validator verdicts of one kind's pairs."""

    def __init__(self, pairs: list[Pair], scores: NDArray[np.float32], reasons: dict[str, list]):
        self.pairs = pairs
        self.scores = scores
        self.reasons = reasons  # mode -> per-pair refusal reason or None
        self.ok = {
            "raw": np.ones(len(pairs), dtype=bool),
            **{m: np.asarray([r is None for r in rs], dtype=bool) for m, rs in reasons.items()},
        }

    def hits(self, threshold: float, mode: str) -> NDArray[np.bool_]:
        return (self.scores >= threshold) & self.ok[mode]

    def rate(self, threshold: float, mode: str, mask: NDArray[np.bool_] | None = None) -> float:
        hits = self.hits(threshold, mode)
        if mask is not None:
            hits = hits[mask]
        return float(hits.mean()) if hits.size else float("nan")


def score_pairs(
    pairs: list[Pair], vectors: NDArray[np.float32], row: dict[str, int], validator: Validator
) -> Scored:
    q = vectors[[row[p.query] for p in pairs]]
    c = vectors[[row[p.cached] for p in pairs]]
    scores = np.einsum("ij,ij->i", q, c).astype(np.float32) if pairs else np.zeros(0, np.float32)
    reasons: dict[str, list] = {"validators": [], "all_guards": []}
    all_guards = list(GUARDS)
    for pair, score in zip(pairs, scores, strict=True):
        entities = validator.extract(pair.cached)
        s = float(score)
        reasons["validators"].append(
            validator.check(pair.query, pair.cached, entities, s, None, ())
        )
        reasons["all_guards"].append(
            validator.check(pair.query, pair.cached, entities, s, None, all_guards)
        )
    return Scored(pairs, scores, reasons)


def curves(scored: dict[str, Scored]) -> list[dict[str, Any]]:
    negatives = [scored[k] for k in NEGATIVE_KINDS]
    rows = []
    for t in THRESHOLDS:
        row: dict[str, Any] = {"threshold": t}
        for mode in MODES:
            rates = {kind: s.rate(t, mode) for kind, s in scored.items()}
            hit_count = sum(int(s.hits(t, mode).sum()) for s in negatives)
            rates["negatives"] = hit_count / max(1, sum(len(s.pairs) for s in negatives))
            row[mode] = rates
        rows.append(row)
    return rows


def choose(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def safe(r: dict[str, Any]) -> bool:
        v = r["validators"]
        return v[HARD] <= GOAL_MISFIRE and v[ENTITY] <= GOAL_MISFIRE

    both = [r for r in rows if safe(r) and r["validators"][POSITIVE] >= GOAL_POSITIVES]
    if both:
        r, met = both[0], True
        why = (
            f"lowest threshold where, with validators, misfires are <= {GOAL_MISFIRE:.0%} on "
            f"hard ({r['validators'][HARD]:.2%}) and entity ({r['validators'][ENTITY]:.2%}) "
            f"negatives while {r['validators'][POSITIVE]:.1%} of positives still hit "
            f"(>= {GOAL_POSITIVES:.0%}); a lower threshold breaks the misfire goal, a higher "
            "one only loses hits"
        )
    elif any(safe(r) for r in rows):
        r, met = next(r for r in rows if safe(r)), False
        why = (
            f"no threshold meets both goals; correctness first: the lowest threshold where "
            f"misfires with validators are <= {GOAL_MISFIRE:.0%} on hard "
            f"({r['validators'][HARD]:.2%}) and entity ({r['validators'][ENTITY]:.2%}) "
            f"negatives keeps only {r['validators'][POSITIVE]:.1%} of positives "
            f"(goal {GOAL_POSITIVES:.0%})"
        )
    else:
        r = min(rows, key=lambda r: (max(r["validators"][HARD], r["validators"][ENTITY]),))
        met = False
        why = (
            f"no threshold brings misfires with validators under {GOAL_MISFIRE:.0%}; the "
            f"threshold with the fewest (hard {r['validators'][HARD]:.2%}, entity "
            f"{r['validators'][ENTITY]:.2%}) keeps {r['validators'][POSITIVE]:.1%} of positives"
        )
    return {"threshold": r["threshold"], "goal_met": met, "reason": why, "at_threshold": r}


def bootstrap_choice(scored: dict[str, Scored], rounds: int, seed: int) -> dict[str, Any]:
    """How stable the choice is: resample every kind's pairs with replacement and
    choose again (the pairs' scores and verdicts are fixed, so this is cheap)."""
    rng = np.random.default_rng(seed)
    ts = np.asarray(THRESHOLDS, dtype=np.float32)[:, None]
    hit = {k: (s.scores[None, :] >= ts) & s.ok["validators"][None, :] for k, s in scored.items()}
    picks: Counter[str] = Counter()
    for _ in range(rounds):
        rates = {}
        for kind in (POSITIVE, HARD, ENTITY):
            n = hit[kind].shape[1]
            rates[kind] = hit[kind][:, rng.integers(0, n, n)].mean(axis=1)
        safe = (rates[HARD] <= GOAL_MISFIRE) & (rates[ENTITY] <= GOAL_MISFIRE)
        both = safe & (rates[POSITIVE] >= GOAL_POSITIVES)
        pick = np.flatnonzero(both if both.any() else safe)
        picks[f"{THRESHOLDS[pick[0]]:.2f}" if pick.size else "none"] += 1
    return {
        "rounds": rounds,
        "chosen_threshold_share": {t: n / rounds for t, n in sorted(picks.items())},
    }
