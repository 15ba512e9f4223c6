"""A tenant's error bound turned into the verifier's cut (issue 12, part 3).

A tenant's policy sets ``target_misfire_rate`` (default 0.01): the fraction of
served semantic hits that may be wrong. The pair verifier ships a calibration
curve (``validators/verifier_model/calibration.json``: for a target, the lowest
cut at which at most that fraction of held-out negative pairs score above it);
that *shipped* cut applies until the tenant has labelled enough of its own hits.

What each number bounds. The *shipped* cut bounds the share of NEGATIVE pairs of the
calibration split scoring above it (a point estimate: 0.96% of English, 0.95% of Chinese
negatives at the 1% cut), not the share of served hits that are wrong: on that split the
1% cut serves 2.3% (English) / 5.6% (Chinese) wrong pairs, since positives are few
there. The tenant's labels, and the report, measure the share of its SERVED hits that
are wrong.

Refinement per tenant from the review queue (``misfire_samples``, labelled, scored by
the verifier in force: ``verifier_model`` holds the score scale of the language model
that scored the sample, one of ``GatewayVerifier.scale_ids``): with at least
:data:`MIN_LABELS` labels whose score is a probability (finite, in [0, 1]; others never
count), the cut only ever RISES above the shipped one (``source="raised"``): above
every range the labels disprove, and then to the lowest labelled score above which all
the samples it serves are not disproved either (disproved: that many misfires would come
at the target rate with chance at most :data:`ALPHA`, an exact one-sided binomial test).
The ranges are bands of :data:`BAND` labels laid from the shipped cut up and groups of
:data:`BAND` or more equal scores, each tested alone at its rank's level, ALPHA spent as
6/π²·1/rank² from the bottom (a tenant exactly at its target is raised in at most ~4% of
draws, measured at 100 to 3,000 labels). A range once disproved stays cut off however
many clean labels arrive above it: new samples come only from above the cut, and they
change neither the bands below it nor their levels (session 37; before, bands laid from
the top score down and a Bonferroni level over their count let clean labels above
re-serve a disproved range, and a candidate cut diluted the band it sat in). ``source="tenant"``
only says the labels confirm the shipped cut (Wilson upper bound within the target among
at least :data:`MIN_LABELS` it serves); labels never lower the cut below the shipped one
(until session 21 they did: that "proof" tried every labelled score on every refresh, no
95% bound, and re-served ranges its own labels had disproved). The cut is within [0, 1].
Shadow verification verdicts are shown in the report but do not move the cut, either
way: a ``disagree`` is no misfire (a model's answers to one question vary; on question
paraphrases standing in for answers, 52-72% of same-meaning pairs fell below the
floor), so raising on it would raise on variation; and an ``agree`` is no proof of a
correct hit on a near miss (a served misfire's questions already passed the retrieval
threshold, above the shadow's floor; its answers were never measured).

Samples are weighted by 1 / the probability they were sampled with: near-threshold
hits are sampled 3× (gateway/review/sampling.py), and counted plainly they would
stand for three times their share of the hits a cut serves. Unweighted, the
estimate leaned toward those hits (pessimistic where they misfire more: a cut
raised, or a proof delayed, on their account). The interval is Wilson's at the
effective sample size (gateway/reports/stats.py ``weighted_wilson``), so unequal
weights widen it; when every sample had the same probability, the counts are the
plain ones.

The labels are read from the database by :mod:`gateway.calibration_labels`; the cut
is kept per tenant, and kept through a database outage, by
:class:`gateway.calibrator.Calibrator`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple

from gateway.reports.stats import weighted_wilson

#: Scored, labelled samples a tenant needs before its own cut replaces the shipped one.
MIN_LABELS = 30
#: Labelled samples per score band checked on its own before a cut may serve it
#: (:func:`_lowest_cut_not_disproved`): enough for a test to say something, few enough
#: to find a bad range.
BAND = 30
#: The level of each disproof (one-sided): at most this chance that labels of a tenant
#: exactly at its target disprove what its cut serves (bands: Bonferroni over them).
ALPHA = 0.025


@dataclass(frozen=True)
class CutInForce:
    """The verifier cut a tenant's lookups use, and the evidence behind it.

    ``estimate``/``low``/``high``: misfire rate among the tenant's labelled samples
    scored above ``cut`` (``served`` of them, ``misfires`` labelled misfire) with
    its 95% Wilson interval, each sample weighted by 1 / its sampling probability
    (plain counts when all were sampled alike); ``None`` without such samples.
    ``is_kept``: the labels could not be read (the database is away), so this is the
    last cut this replica computed for the tenant, kept through the outage."""

    target: float
    cut: float
    shipped_cut: float
    source: Literal["shipped", "tenant", "raised", "unavailable"]
    labelled: int
    served: int
    misfires: int
    estimate: float | None
    low: float | None
    high: float | None
    is_kept: bool = False
    # The cut the disproved ranges alone set (below it: a range the labels ruled out);
    # what gateway/calibrator.py keeps so that a backlog of labels cannot re-serve them.
    band_cut: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["band_cut"]
        return out


class Label(NamedTuple):
    """A labelled sample: its verifier score, whether it was a misfire, and its weight
    (1 / the probability it was sampled with)."""

    score: float
    misfire: bool
    weight: float = 1.0


def weighted(labels: Sequence[tuple[float, bool] | tuple[float, bool, float]]) -> list[Label]:
    """``labels`` as :class:`Label` sorted by score, every weight 1 when they are all
    equal (uniform sampling: the plain counts, bit for bit)."""
    out = sorted(Label(*x) for x in labels)
    if len({x.weight for x in out}) <= 1:
        return [x._replace(weight=1.0) for x in out]
    return out


class _Suffix:
    """Sums over the labels from position ``i`` up (sorted by score: what a cut just
    below ``labels[i].score`` serves): count, misfires, Σw, Σw·m, Σw², Σw²·m. Each is added
    from the top score down, never a difference of larger sums: subtracting weights
    that span orders of magnitude left Σw² negative and the interval undefined."""

    def __init__(self, labels: Sequence[Label]) -> None:
        size = len(labels) + 1
        self.n, self.k = [0] * size, [0] * size
        self.w, self.wm, self.w2 = [0.0] * size, [0.0] * size, [0.0] * size
        self.w2m = [0.0] * size
        for i in range(len(labels) - 1, -1, -1):
            x = labels[i]
            self.n[i], self.k[i] = self.n[i + 1] + 1, self.k[i + 1] + x.misfire
            self.w[i] = self.w[i + 1] + x.weight
            self.wm[i] = self.wm[i + 1] + (x.weight if x.misfire else 0.0)
            self.w2[i] = self.w2[i + 1] + x.weight * x.weight
            self.w2m[i] = self.w2m[i + 1] + (x.weight * x.weight if x.misfire else 0.0)

    def interval(self, i: int) -> tuple[float, float, float] | None:
        """(rate, low, high) from position ``i`` up, weighted
        (gateway/reports/stats.py ``weighted_wilson``); None when nothing is there."""
        if self.n[i] == 0:
            return None
        return weighted_wilson(self.wm[i], self.w[i], self.w2[i], self.w2m[i])


def _first_above(ordered: Sequence[Label], cut: float) -> int:
    """Position of the first label a cut serves (score above it); ``ordered`` is sorted."""
    return bisect.bisect_right([x.score for x in ordered], cut)


def usable(labels: Sequence[tuple[float, bool] | tuple[float, bool, float]]) -> list[Label]:
    """The labels whose score is a verifier probability (finite, in [0, 1]) and whose
    weight is finite and positive. A NaN score never compared equal to itself and hung
    the scan over the scores; one above 1 (or inf) raised the cut above 1, which no
    lookup accepts: every request of the tenant failed."""
    out = [Label(*x) for x in labels]
    return [
        x
        for x in out
        if math.isfinite(x.score)
        and 0.0 <= x.score <= 1.0
        and math.isfinite(x.weight)
        and x.weight > 0.0
    ]


def _clamped(cut: float) -> float:
    """``cut`` within [0, 1]; NaN is 1.0 (nothing served: never a guess)."""
    return 1.0 if math.isnan(cut) else min(1.0, max(0.0, cut))


#: The targets of the shipped curve's table (validators/verifier_model/MODEL_CARD.md):
#: a tenant's cut is at least the one its labels give each looser one of them.
TARGET_GRID = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


def tenant_cut(
    labels: Sequence[tuple[float, bool] | tuple[float, bool, float]],
    target: float,
    shipped_cut: float,
    min_labels: int = MIN_LABELS,
    *,
    refine: bool = True,
    looser: Sequence[tuple[float, float]] = (),
    kept: float = 0.0,
) -> CutInForce:
    """The cut in force for ``labels`` (verifier score, is a misfire[, weight]) and
    ``target``; ``refine=False`` keeps ``shipped_cut`` whatever the labels say.
    Never below ``shipped_cut``, always within [0, 1]; never below the cut the labels
    give a looser target of ``looser`` ((target, its shipped cut) pairs): too many
    misfires for 2% are too many for 1%, but the bands are laid from each target's
    shipped cut, so at 1% a range 2% had disproved could fall across two bands and be
    served again (a review, session 40: a stricter target gave a lower cut). ``kept``:
    a band cut these labels' ranges gave before (:attr:`CutInForce.band_cut`), below
    which nothing is served however the bands fall now."""
    ordered = weighted(usable(labels))
    sums = _Suffix(ordered)
    shipped_cut = _clamped(shipped_cut)
    cut = shipped_cut
    source: Literal["shipped", "tenant", "raised"] = "shipped"
    refining = refine and len(ordered) >= min_labels
    band_cut = shipped_cut
    if refining:
        cut, band_cut = _lowest_cut_not_disproved(ordered, target, shipped_cut, _clamped(kept))
        for wider, wider_shipped in looser:
            if wider > target:
                more = _lowest_cut_not_disproved(ordered, wider, _clamped(wider_shipped))
                cut, band_cut = max(cut, more[0]), max(band_cut, more[1])
        if cut > shipped_cut:
            source = "raised"
    served = _first_above(ordered, cut)
    interval = sums.interval(served)
    # A description only: the labels confirm the shipped cut. It never lowers the cut
    # (tried at every labelled score and on every refresh, such a "proof" was no 95%
    # bound, and it re-served ranges its labels had disproved).
    confirmed = interval is not None and interval[2] <= target
    if refining and source == "shipped" and sums.n[served] >= min_labels and confirmed:
        source = "tenant"
    return CutInForce(
        target=target,
        cut=cut,
        shipped_cut=shipped_cut,
        source=source,
        labelled=len(ordered),
        served=sums.n[served],
        misfires=sums.k[served],
        estimate=interval[0] if interval else None,
        low=interval[1] if interval else None,
        high=interval[2] if interval else None,
        band_cut=band_cut,
    )


def _disproved(labels: Sequence[Label], target: float, alpha: float = ALPHA) -> bool:
    """Whether the labels hold too many misfires for ``target``: were the rate
    ``target``, at least that many would come with chance at most ``alpha`` (exact
    one-sided binomial; weighted labels at Kish's effective sample size). Not Wilson's
    lower bound: for a few dozen labels near a 1% rate it is anti-conservative (2
    misfires of 30 put it above 1%, which a tenant exactly at its target draws 3.6% of
    the time per band: with ten bands its cut was raised in ~30% of draws)."""
    if not labels:
        return False
    w = math.fsum(x.weight for x in labels)
    wm = math.fsum(x.weight for x in labels if x.misfire)
    w2 = math.fsum(x.weight * x.weight for x in labels)
    if w <= 0 or w2 <= 0 or not 0.0 < target < 1.0:
        return False
    n = max(1, round(w * w / w2))
    k = math.floor(wm / w * n + 1e-9)  # the misfires at that size (rounded down: no alarm)
    return _binomial_tail(k, n, target) <= alpha


def _binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), 0 < p < 1; 1.0 when k is at most the mean (then
    no test here can pass, and the terms need not be summed)."""
    if k <= 0 or k <= n * p:
        return 1.0
    if k > n:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total, i = 0.0, k
    # past the mean the terms only shrink: stop once they no longer count
    while i <= n:
        term = math.exp(
            math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
            + i * log_p + (n - i) * log_q
        )  # fmt: skip
        total += term
        if term < total * 1e-12:
            break
        i += 1
    return min(1.0, total)


def _band_alpha(rank: int) -> float:
    """The level of the ``rank``-th range tested, counted from the shipped cut up (1: the
    lowest): :data:`ALPHA` spent as 6/π² · 1/rank², so however many ranges there are,
    labels within the target disprove one of them with at most ALPHA's chance, and a
    range's level never changes as labels arrive above it. (A Bonferroni level over
    the number of bands did: clean labels piling up above a disproved range shrank its
    level until it was no longer disproved, and the range was served again.) Most of
    it goes to the lowest ranges, where misfires live: just above the cut."""
    return ALPHA * 6.0 / (math.pi**2 * rank * rank)


def _bands(ordered: Sequence[Label], start: int) -> list[tuple[int, int]]:
    """``ordered[start:]`` cut into [lo, hi) bands from the shipped cut UP, each of
    :data:`BAND` labels (equal scores kept together: a cut cannot split them); the top
    one may be shorter. From the bottom and never merged, so a band keeps its labels
    whatever arrives above it: once a range is disproved and cut off, new samples come
    only from above the cut, and the range stays the band it was. (Laid from the top
    score down, every new label above shifted every band by one; a bad range split
    between two bands was disproved in neither, and served again.)"""
    bands: list[tuple[int, int]] = []
    lo, total = start, len(ordered)
    while lo < total:
        hi = min(total, lo + BAND)
        while hi < total and ordered[hi].score == ordered[hi - 1].score:
            hi += 1
        bands.append((lo, hi))
        lo = hi
    return bands


def _tie_groups(ordered: Sequence[Label], start: int) -> list[tuple[int, int]]:
    """[lo, hi) runs of at least :data:`BAND` equal scores in ``ordered[start:]``."""
    out: list[tuple[int, int]] = []
    lo = start
    while lo < len(ordered):
        hi = lo
        while hi < len(ordered) and ordered[hi].score == ordered[lo].score:
            hi += 1
        if hi - lo >= BAND:
            out.append((lo, hi))
        lo = hi
    return out


def _lowest_cut_not_disproved(
    ordered: Sequence[Label], target: float, shipped_cut: float, kept: float = 0.0
) -> tuple[float, float]:
    """``shipped_cut`` unless the labels disprove a range it serves, else the lowest
    labelled score above every disproved range, as a cut; higher still while what that
    cut serves, pooled, is disproved (at worst the highest score: nothing labelled is
    served above it). The ranges are the bands of :func:`_bands` and the groups of
    :data:`BAND` or more equal scores, each tested alone (:func:`_disproved`) at its
    rank's level (:func:`_band_alpha`).

    A cut is never inside or below a disproved range. Before, a candidate one label
    above the cut re-formed its own lowest band from the short piece above it and the
    band above, which diluted a disproved band: it served all 3 misfires of a band of
    30 at a 1% target, estimate 3.4% [1.15%, 9.45%], as "raised". Pooled, clean labels
    above an old bad range outvote it, which is why ranges are tested alone. Returns
    (the cut, the cut the disproved ranges and ``kept`` alone set)."""
    total = len(ordered)
    start = _first_above(ordered, shipped_cut)
    ranges = sorted(set(_bands(ordered, start)) | set(_tie_groups(ordered, start)))
    floor = start  # no label below this position is served
    for rank, (lo, hi) in enumerate(ranges, 1):
        if hi > floor and _disproved(ordered[lo:hi], target, _band_alpha(rank)):
            floor = hi
    band_cut = max(shipped_cut if floor == start else ordered[floor - 1].score, kept)
    cut, i = band_cut, max(floor, _first_above(ordered, band_cut))
    while i < total and _disproved(ordered[i:], target):
        cut = ordered[i].score  # serve only what scored above this sample
        while i < total and ordered[i].score == cut:
            i += 1
    return cut, band_cut
