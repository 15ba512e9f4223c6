"""A tenant's error bound turned into the verifier's cut (issue 12, part 3).

A tenant's policy sets ``target_misfire_rate`` (default 0.01): the fraction of
served semantic hits that may be wrong. The pair verifier ships a calibration
curve (``validators/verifier_model/calibration.json``: for a target, the lowest
cut at which at most that fraction of held-out negative pairs score above it);
that *shipped* cut applies until the tenant has labelled enough of its own hits.

Refinement per tenant, as vCache does per entry, from the review queue
(``misfire_samples``: sampled hits, each stored with its verifier score and
labelled ``correct`` or ``misfire`` by a reviewer; only the samples scored by the
verifier in force, ``verifier_model``, since a retrained model's scores are on
another scale): with at least
:data:`MIN_LABELS` scored labels, the cut is the lowest one at which the upper
95% Wilson bound of the misfire rate among the labelled samples the cut would
serve (score above it, at least :data:`MIN_LABELS` of them) is at most the
target; when no cut proves the target, the shipped cut stays, unless the
labels *disprove* it (the Wilson lower bound of the misfire rate among the
samples it serves is above the target): then the cut is raised to the lowest one
the labels do not disprove (``source="raised"``), so a tenant whose reviewers find
its hits wrong stops being served them before it has the hundreds of clean labels
a proof needs (381 at 1%). Every sample was served under some earlier cut, so a
tenant's cut never goes below the scores it has evidence for. A cut chosen at a
labelled score is the next float below it: it serves exactly the samples the
check counted, no sample just below. Shadow verification verdicts are shown in the report but
do not move the cut: an answer sampled again at a temperature differs from the
first for reasons that are not misfires.

Samples are weighted by 1 / the probability they were sampled with: near-threshold
hits are sampled 3× (gateway/review/sampling.py), and counted plainly they would
stand for three times their share of the hits a cut serves. Unweighted, the
estimate leaned toward those hits (pessimistic where they misfire more: a cut
raised, or a proof delayed, on their account). The interval is Wilson's at Kish's
effective sample size (gateway/reports/stats.py ``weighted_wilson``), so unequal
weights widen it; when every sample had the same probability, the counts are the
plain ones.

:class:`Calibrator` keeps each tenant's cut for ``ttl`` seconds (a label takes
effect within that time on every replica, since each reads the database); a
tenant change (deleted, policy or keys; the replica-sync feed) drops it at once, so
a tenant re-created under a deleted one's id never inherits its cut. When the
shipped curve is unusable the cut is 1.0 and the tenant's labels do not lower it.

While the database is away, a tenant keeps the last cut this replica computed for
it. One it has none for (a replica started during the outage, a policy changed just
before it, a new target) gets cut 1.0, ``source="unavailable"``: nothing is served
through the verifier until the labels can be read. The shipped cut would be a guess
there, and a looser one than the tenant's own wherever its reviewers had raised it.
After a failed read the database is left alone for ``retry`` seconds, for every
tenant, then one lookup probes it (each try can wait out a connection timeout on a
worker thread, and lookups of many tenants must not queue behind such tries). A read
failing for another reason (not a database error) gives that tenant the same answer
without marking the database away.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple

from sqlalchemy import Engine, select
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from gateway.models import MisfireSample
from gateway.reports.stats import weighted_wilson

log = logging.getLogger("cachegate.gateway.calibration")

#: Scored, labelled samples a tenant needs before its own cut replaces the shipped one.
MIN_LABELS = 30
#: The most recent labelled samples read per tenant.
MAX_SAMPLES = 20_000


@dataclass(frozen=True)
class CutInForce:
    """The verifier cut a tenant's lookups use, and the evidence behind it.

    ``estimate``/``low``/``high``: misfire rate among the tenant's labelled samples
    scored above ``cut`` (``served`` of them, ``misfires`` labelled misfire) with
    its 95% Wilson interval, each sample weighted by 1 / its sampling probability
    (plain counts when all were sampled alike); ``None`` without such samples."""

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    below ``labels[i].score`` serves): count, misfires, Σw, Σw·m, Σw². Each is added
    from the top score down, never a difference of larger sums: subtracting weights
    that span orders of magnitude left Σw² negative and the interval undefined."""

    def __init__(self, labels: Sequence[Label]) -> None:
        size = len(labels) + 1
        self.n, self.k = [0] * size, [0] * size
        self.w, self.wm, self.w2 = [0.0] * size, [0.0] * size, [0.0] * size
        for i in range(len(labels) - 1, -1, -1):
            x = labels[i]
            self.n[i], self.k[i] = self.n[i + 1] + 1, self.k[i + 1] + x.misfire
            self.w[i] = self.w[i + 1] + x.weight
            self.wm[i] = self.wm[i + 1] + (x.weight if x.misfire else 0.0)
            self.w2[i] = self.w2[i + 1] + x.weight * x.weight

    def interval(self, i: int) -> tuple[float, float, float] | None:
        """(rate, low, high) from position ``i`` up, weighted
        (gateway/reports/stats.py ``weighted_wilson``); None when nothing is there."""
        if self.n[i] == 0:
            return None
        return weighted_wilson(self.wm[i], self.w[i], self.w2[i])


def _first_above(ordered: Sequence[Label], cut: float) -> int:
    """Position of the first label a cut serves (score above it)."""
    return next((j for j, x in enumerate(ordered) if x.score > cut), len(ordered))


def tenant_cut(
    labels: Sequence[tuple[float, bool] | tuple[float, bool, float]],
    target: float,
    shipped_cut: float,
    min_labels: int = MIN_LABELS,
    *,
    refine: bool = True,
) -> CutInForce:
    """The cut in force for ``labels`` (verifier score, is a misfire[, weight]) and
    ``target``; ``refine=False`` keeps ``shipped_cut`` whatever the labels say."""
    ordered = weighted(labels)
    sums = _Suffix(ordered)
    cut = shipped_cut
    source: Literal["shipped", "tenant", "raised"] = "shipped"
    if refine and len(ordered) >= min_labels:
        found = _lowest_proven_cut(ordered, sums, target, min_labels)
        if found is not None:
            cut, source = found, "tenant"
        else:
            raised = _lowest_cut_not_disproved(ordered, sums, target, shipped_cut)
            if raised > shipped_cut:
                cut, source = raised, "raised"
    served = _first_above(ordered, cut)
    interval = sums.interval(served)
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
    )


def _lowest_proven_cut(
    ordered: Sequence[Label], sums: _Suffix, target: float, min_labels: int
) -> float | None:
    """Lowest cut (just below a labelled score) whose served samples' (weighted) Wilson
    upper bound is at most ``target``; ``ordered`` is sorted by score."""
    i, total = 0, len(ordered)
    while i < total and sums.n[i] >= min_labels:
        score = ordered[i].score
        interval = sums.interval(i)
        if interval is not None and interval[2] <= target:
            # Serving is "score > cut": the next float below serves this score and
            # nothing below it (a fixed margin would serve samples never counted).
            return max(0.0, math.nextafter(score, -math.inf))
        while i < total and ordered[i].score == score:
            i += 1
    return None


def _lowest_cut_not_disproved(
    ordered: Sequence[Label], sums: _Suffix, target: float, shipped_cut: float
) -> float:
    """``shipped_cut`` when its served samples' (weighted) Wilson lower bound is at most
    ``target``, else the lowest labelled score above it, as a cut, that is so (at
    worst the highest score: nothing labelled is served above it)."""
    total = len(ordered)
    i = _first_above(ordered, shipped_cut)
    cut = shipped_cut
    while i < total:
        interval = sums.interval(i)
        if interval is None or interval[1] <= target:
            return cut
        cut = ordered[i].score  # serve only what scored above this sample
        while i < total and ordered[i].score == cut:
            i += 1
    return cut


def load_labels(db: Engine, tenant_id: str, verifier_model: str | None = None) -> list[Label]:
    """A tenant's labelled samples that carry a verifier score, newest first, each
    weighted by 1 / the probability it was sampled with (``entity_comparison.sampling``,
    gateway/review/sampling.py); when any sample lacks a usable one, every weight is 1
    (plain counts: a weight guessed for some would skew the rest); with
    ``verifier_model``, only those that verifier scored."""
    statement = (
        select(MisfireSample.verifier_score, MisfireSample.label, MisfireSample.entity_comparison)
        .where(MisfireSample.tenant_id == tenant_id)
        .where(MisfireSample.label.is_not(None))
        .where(MisfireSample.verifier_score.is_not(None))
    )
    if verifier_model is not None:
        statement = statement.where(MisfireSample.verifier_model == verifier_model)
    statement = statement.order_by(MisfireSample.id.desc()).limit(MAX_SAMPLES)
    with Session(db) as s:
        rows = [
            (float(score), label == "misfire", _weight(comparison))
            for score, label, comparison in s.execute(statement)
            if score is not None
        ]
    plain = any(w is None for _, _, w in rows)
    return [Label(score, misfire, 1.0 if plain or w is None else w) for score, misfire, w in rows]


#: Sampling probabilities below this are not believed (a weight of a million already
#: outweighs any label set a tenant reviews; smaller ones overflow Σw²).
MIN_PROBABILITY = 1e-6


def recorded_probability(comparison: object) -> float | None:
    """The sampling probability stored with a sample (``entity_comparison.sampling``,
    gateway/review/sampling.py); None when absent or unusable."""
    sampling = comparison.get("sampling") if isinstance(comparison, dict) else None
    p = sampling.get("probability") if isinstance(sampling, dict) else None
    if isinstance(p, int | float) and not isinstance(p, bool) and MIN_PROBABILITY <= p <= 1.0:
        return float(p)
    return None


def _weight(comparison: object) -> float | None:
    """1 / the sampling probability recorded with a sample; None when absent or unusable."""
    p = recorded_probability(comparison)
    return None if p is None else 1.0 / p


class Calibrator:
    """Each tenant's :class:`CutInForce`, computed from the database and kept ``ttl`` s.

    ``shipped`` maps a target to the shipped curve's cut; when it fails (a damaged
    calibration file), the cut is 1.0: nothing is served, never a guess.
    ``verifier_model``: the verifier in force (``GatewayVerifier.scale_id``); only
    its samples are read (None: every scored sample). ``retry``: seconds between
    tries of the database while it is away (at most ``ttl``)."""

    def __init__(
        self,
        db: Engine | None,
        shipped: Callable[[float], float],
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        verifier_model: str | None = None,
        retry: float = 5.0,
    ) -> None:
        self.db = db
        self.verifier_model = verifier_model
        self.shipped = shipped
        self.ttl = ttl
        self.retry = min(retry, ttl)
        self._clock = clock
        self._lock = threading.Lock()
        self._cuts: dict[tuple[str, float], tuple[float, CutInForce]] = {}
        # While the database is away: when the next read may try it (one probe at a time).
        self._away = False
        self._next_try = 0.0

    def current(self, tenant_id: str, target: float) -> CutInForce | None:
        """The kept cut when it is still fresh, else None (then call :meth:`refresh`)."""
        with self._lock:
            kept = self._cuts.get((tenant_id, target))
        if kept is None or self._clock() - kept[0] > self.ttl:
            return None
        return kept[1]

    def refresh(self, tenant_id: str, target: float) -> CutInForce:
        """Compute the tenant's cut now (reads the database: call it off the event loop)."""
        usable = True
        try:
            shipped = float(self.shipped(target))
        except Exception as exc:
            log.error("verifier calibration unusable (%s): nothing is served", type(exc).__name__)
            shipped, usable = 1.0, False
        if not self._may_read():
            return self._without_labels(tenant_id, target, shipped)
        try:
            db, model = self.db, self.verifier_model
            labels = [] if db is None else load_labels(db, tenant_id, model)
        except sa_exc.SQLAlchemyError as exc:
            self._database_away(exc)
            return self._without_labels(tenant_id, target, shipped)
        except Exception as exc:  # this tenant's read, not the database: said, not retried
            log.error("tenant calibration read failed (%s)", type(exc).__name__)
            return self._without_labels(tenant_id, target, shipped)
        with self._lock:
            recovered, self._away = self._away, False
        if recovered:
            log.warning("tenant calibration readable again: cuts from the database")
        cut = tenant_cut(labels, target, shipped, refine=usable)
        with self._lock:
            self._cuts[(tenant_id, target)] = (self._clock(), cut)
        return cut

    def _may_read(self) -> bool:
        """Whether this read may try the database: always while it answers; while it is
        away, one read every ``retry`` seconds (the probe; the rest wait for its turn)."""
        with self._lock:
            if not self._away:
                return True
            now = self._clock()
            if now < self._next_try:
                return False
            self._next_try = now + self.retry
            return True

    def _database_away(self, exc: Exception) -> None:
        with self._lock:
            first, self._away = not self._away, True
            self._next_try = self._clock() + self.retry
        if first:
            log.warning(
                "tenant calibration unavailable (%s): last known cuts kept, cut 1.0 where"
                " none is known, the database tried again every %.0f s",
                type(exc).__name__,
                self.retry,
            )

    def _without_labels(self, tenant_id: str, target: float, shipped: float) -> CutInForce:
        """The last cut known for the tenant, else one that serves nothing; kept fresh for
        ``retry`` seconds (lookups use it meanwhile instead of asking again)."""
        key = (tenant_id, target)
        with self._lock:
            stale = self._cuts.get(key)
            cut = stale[1] if stale is not None else _unavailable(target, shipped)
            # current() reads it as ttl - retry old: fresh for ``retry`` more seconds
            self._cuts[key] = (self._clock() - self.ttl + self.retry, cut)
        return cut

    def invalidate(self, *tenant_ids: str) -> None:
        """Drop the kept cuts of ``tenant_ids`` (every tenant's when none is named)."""
        with self._lock:
            for key in [k for k in self._cuts if not tenant_ids or k[0] in tenant_ids]:
                del self._cuts[key]


def _unavailable(target: float, shipped: float) -> CutInForce:
    """A cut that serves nothing through the verifier, for want of the tenant's labels."""
    return CutInForce(
        target=target,
        cut=1.0,
        shipped_cut=shipped,
        source="unavailable",
        labelled=0,
        served=0,
        misfires=0,
        estimate=None,
        low=None,
        high=None,
    )
