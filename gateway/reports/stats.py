"""The statistics behind the misfire report: pure functions over plain numbers.

- **Wilson score interval** (95%, z = 1.959964) for a proportion k/n::

      p = k/n,  d = 1 + z²/n
      centre = (p + z²/2n) / d,   half = z·sqrt(p(1-p)/n + z²/4n²) / d
      interval = [centre - half, centre + half]   (None when n = 0)

- **Weighted**, for samples drawn with unequal probabilities (near-threshold hits ×3):
  each weighs 1/probability, the rate is Σw·m / Σw and the interval Wilson's at an
  effective size n_eff (:func:`weighted_wilson`; the tenant's verifier cut,
  gateway/calibration.py): the smaller of Kish's (Σw)²/Σw² and the ratio estimator's
  p(1-p)/Var, Var = Σw²(m-p)² / (Σw)² (its linearised variance). Kish's alone assumes
  the rate is the same in every weight class; where misfires sit in the rarely sampled,
  heavy hits it covered the truth 80-87% of the time instead of 95% (a review, session
  44's simulations); with both, 93-95%.
- **Score buckets**: half-open ``[lo, hi)`` except the last, which includes its
  upper edge; a score below the first edge falls in an ``< first`` bucket.
- **Threshold curve**: for each distinct labelled score t (ascending), the
  labelled samples with score ≥ t: n(t), misfires k(t), k/n and its Wilson
  upper bound, and the same weighted (the rate of hits above t; since session 44 the
  recommendation reads these, as the headline does: counted plainly, near-threshold
  hits sampled ×3 stood for three times their share).
- **Recommended threshold** for a target misfire rate: the lowest t on the curve
  whose criterion is ≤ target; criterion ``wilson_upper`` (default: the 95%
  upper bound, so a handful of lucky samples never justifies a threshold) or
  ``point`` (k/n). None when no t qualifies. Samples only exist above the
  threshold in force when they were taken, so the recommendation can only
  confirm or raise a threshold, never justify a lower one.
- **Percentiles**: numpy's default linear interpolation between order statistics.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Z95 = 1.959963984540054
Criterion = Literal["wilson_upper", "point"]
DEFAULT_EDGES: tuple[float, ...] = (
    0.80,
    0.82,
    0.84,
    0.86,
    0.88,
    0.90,
    0.92,
    0.94,
    0.96,
    0.98,
    1.00,
)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    return None if n <= 0 else wilson_at(k / n, n, z)


def weighted_wilson(
    sum_wm: float, sum_w: float, sum_w2: float, sum_w2m: float | None = None, z: float = Z95
) -> tuple[float, float, float] | None:
    """``(rate, low, high)`` of a proportion over samples drawn with unequal
    probabilities, each weighted ``w = 1/probability``: the rate is Σw·m / Σw (m = 1
    for a misfire) and the interval is Wilson's at :func:`effective_size` (n when every
    weight is equal: then this is :func:`wilson`, up to rounding). ``sum_w2m``: Σw²·m,
    without which the size is Kish's alone."""
    if sum_w <= 0 or sum_w2 <= 0:
        return None
    p = min(1.0, max(0.0, sum_wm / sum_w))
    interval = wilson_at(p, effective_size(p, sum_w, sum_w2, sum_w2m), z)
    return p, interval[0], interval[1]


def effective_size(p: float, sum_w: float, sum_w2: float, sum_w2m: float | None) -> float:
    """The smaller of Kish's (Σw)²/Σw² and p(1-p)/Var with the ratio estimator's
    linearised Var = Σw²(m-p)²/(Σw)² = (Σw²m·(1-2p) + p²·Σw²)/(Σw)² (module docstring)."""
    kish = sum_w * sum_w / sum_w2
    if sum_w2m is None:
        return kish
    var = (sum_w2m * (1 - 2 * p) + p * p * sum_w2) / (sum_w * sum_w)
    if var <= 0 or p <= 0 or p >= 1:
        return kish
    return max(1e-9, min(kish, p * (1 - p) / var))


def wilson_at(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson's interval for an observed rate ``p`` over ``n`` (> 0) samples."""
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def samples_needed(target: float, z: float = Z95) -> int:
    """The fewest labelled samples with no misfire whose Wilson upper bound is ≤ target
    (upper(0, n) = z²/(n + z²) ≤ target  ⇔  n ≥ z²(1/target - 1))."""
    if not 0 < target < 1:
        return 0
    return math.ceil(min(z * z * (1 / target - 1), 1e15))  # a tiny target: "practically never"


def rate(k: int, n: int) -> float | None:
    return k / n if n else None


def proportion(k: int, n: int) -> dict[str, Any]:
    ci = wilson(k, n)
    return {
        "k": k,
        "n": n,
        "rate": rate(k, n),
        "wilson_low": ci[0] if ci else None,
        "wilson_high": ci[1] if ci else None,
    }


@dataclass(frozen=True)
class Labelled:
    score: float
    misfire: bool
    weight: float = 1.0  # 1 / the probability it was sampled with


def buckets(
    samples: Sequence[Labelled], edges: Sequence[float] = DEFAULT_EDGES
) -> list[dict[str, Any]]:
    """Misfire rate per score bucket (see the module docstring for the edges)."""
    out: list[dict[str, Any]] = []
    below = [s for s in samples if s.score < edges[0]]
    if below:
        out.append({"low": None, "high": edges[0], **_count(below)})
    for i, (lo, hi) in enumerate(itertools.pairwise(edges)):
        last = i == len(edges) - 2
        inside = [s for s in samples if lo <= s.score < hi or (last and s.score >= hi)]
        out.append({"low": lo, "high": hi, **_count(inside)})
    return out


def _count(samples: Sequence[Labelled]) -> dict[str, Any]:
    k = sum(s.misfire for s in samples)
    return proportion(k, len(samples))


def threshold_curve(samples: Sequence[Labelled]) -> list[dict[str, Any]]:
    """One point per distinct labelled score: the samples at or above it, counted
    plainly (``k``, ``n``, ``rate``, ``wilson_*``) and weighted by 1 / their sampling
    probability (``weighted_rate``, ``weighted_wilson_high``: :func:`weighted_wilson`),
    the share of the *hits* served above it (near-threshold hits are sampled ×3)."""
    ordered = sorted(samples, key=lambda s: s.score)
    total = len(ordered)
    # Suffix sums from the top down (never differences of larger sums: see
    # gateway/calibration.py's _Suffix).
    sums = [(0.0, 0.0, 0.0, 0.0)] * (total + 1)
    for j in range(total - 1, -1, -1):
        x, (w, wm, w2, w2m) = ordered[j], sums[j + 1]
        m = 1.0 if x.misfire else 0.0
        sums[j] = (w + x.weight, wm + m * x.weight, w2 + x.weight**2, w2m + m * x.weight**2)
    points: list[dict[str, Any]] = []
    misfires_above = sum(s.misfire for s in ordered)
    i = 0
    while i < total:
        t = ordered[i].score
        n = total - i
        w, wm, w2, w2m = sums[i]
        found = weighted_wilson(wm, w, w2, w2m)
        points.append(
            {
                "threshold": t,
                "coverage": n / total,
                **proportion(misfires_above, n),
                "weighted_rate": found[0] if found else None,
                "weighted_wilson_high": found[2] if found else None,
            }
        )
        while i < total and ordered[i].score == t:
            misfires_above -= ordered[i].misfire
            i += 1
    return points


def recommend(
    curve: Sequence[dict[str, Any]], target: float, criterion: Criterion = "wilson_upper"
) -> dict[str, Any]:
    # weighted when the curve is (the share of hits, as the headline), else plain
    key = "wilson_high" if criterion == "wilson_upper" else "rate"
    rate_key, high_key = "rate", "wilson_high"
    if curve and curve[0].get("weighted_rate") is not None:
        key = "weighted_wilson_high" if criterion == "wilson_upper" else "weighted_rate"
        rate_key, high_key = "weighted_rate", "weighted_wilson_high"
    for point in curve:
        if point[key] is not None and point[key] <= target:
            return {
                "threshold": point["threshold"],
                "target": target,
                "criterion": criterion,
                "labelled_at_or_above": point["n"],
                "misfires_at_or_above": point["k"],
                "misfire_rate": point[rate_key],
                "wilson_high": point[high_key],
                "reason": None,
            }
    need = samples_needed(target)
    misfires = curve[0]["k"] if curve else 0  # at the lowest threshold: all labels
    reason = (
        "no labelled samples yet"
        if not curve
        else f"no threshold meets the target; with zero misfires the 95% Wilson upper bound "
        f"reaches {target:g} only after {need} labelled samples"
        if criterion == "wilson_upper" and misfires == 0
        else f"no threshold meets the target ({misfires} misfires among "
        f"{curve[0]['n']} labelled samples; above a threshold with none, the 95% Wilson "
        f"upper bound reaches {target:g} only after {need} labelled samples)"
        if criterion == "wilson_upper"
        else "no threshold meets the target"
    )
    return {
        "threshold": None,
        "target": target,
        "criterion": criterion,
        "labelled_at_or_above": 0,
        "misfires_at_or_above": 0,
        "misfire_rate": None,
        "wilson_high": None,
        "reason": reason,
        "samples_needed_at_zero_misfires": need,
    }


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 99)) -> dict[str, Any]:
    if not values:
        return {"count": 0, **{f"p{q:g}": None for q in qs}}
    arr = np.asarray(values, dtype=np.float64)
    return {"count": len(values), **{f"p{q:g}": float(np.percentile(arr, q)) for q in qs}}


def thin(points: Sequence[Any], limit: int) -> list[Any]:
    """At most ``limit`` evenly spaced items, keeping the first and the last."""
    if len(points) <= limit:
        return list(points)
    idx = np.unique(np.linspace(0, len(points) - 1, limit).round().astype(int))
    return [points[i] for i in idx]
