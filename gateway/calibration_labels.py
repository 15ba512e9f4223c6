"""Reading a tenant's labelled review samples for its verifier cut
(:mod:`gateway.calibration` computes the cut from them).

Only samples whose verifier score came from a score scale in force count (one id per
language, ``GatewayVerifier.scale_ids``; the sampler stores the id of the model that
read each pair): the newest :data:`MAX_SAMPLES` and the :data:`MAX_SAMPLES` with the
lowest scores, each once; each weighs 1 / the probability it was sampled with. The
labels left out for their scale are counted apart for the report.

Only labels of hits the tenant's lookups would still make count: a sample whose
similarity is below the retrieval threshold in force, read by the embedder in force,
was served at a lower threshold than today's (the tenant has raised it since), and
says nothing of what its cut serves now. Until session 47 such labels stayed: misfires
a raised threshold had already removed kept the verifier cut raised too. Samples of
another embedder (its similarities are on another scale) or of none recorded count.

A sample without a usable sampling record (one stored before records were kept) weighs
what the tenant's recorded samples weigh in the middle (their median). Until session
47 one such sample made every weight 1: a tenant sampling at 1% after a week at 100%
had its month of labels counted as if all were drawn alike.

When there are more labels than the two windows hold, the lowest-scored window is
every label below its highest score, but above that score only the newest are read:
those stand for all the labels there, misfires and correct ones apart (each class's
read labels are scaled to weigh what all of that class's labels there weigh, summed
over them row by row). Read plainly, the two windows counted every low score and a
fraction of the high ones, and low scores are where misfires are: the estimate leaned
toward misfires (a review, session 46).

Why the lowest scores too: a range the labels disprove is cut off for good
(gateway/calibration.py), and from then on new samples come only from above the cut.
With the newest alone, a tenant that labels on would push the disproving labels out of
the window after :data:`MAX_SAMPLES` more, and the range be served again. The lowest
scores are where disproved ranges lie (bands are laid from the shipped cut up), and no
label joins them once they are cut off, so they stay read.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection
from typing import Any, NamedTuple

from sqlalchemy import Engine, func, or_, select
from sqlalchemy.orm import Session

from gateway.calibration import Label
from gateway.models import MisfireSample

#: The most recent labelled samples read per tenant, and as many lowest-scored ones.
MAX_SAMPLES = 20_000
#: Slack below a retrieval threshold for a similarity stored as float32 and read back.
SIMILARITY_SLACK = 1e-6


class Retrieval(NamedTuple):
    """The retrieval in force: the embedder's id and the threshold its lookups use."""

    embedder_id: str
    threshold: float


def sampling_record() -> Any:
    """The column of a sample's sampling record (``entity_comparison.sampling``) alone."""
    return MisfireSample.entity_comparison["sampling"]


def load_labels(
    db: Engine,
    tenant_id: str,
    verifier_models: Collection[str] | None = None,
    retrieval: Retrieval | None = None,
) -> list[Label]:
    """A tenant's labelled samples that carry a verifier score, newest first, each
    weighted by 1 / the probability it was sampled with (``entity_comparison.sampling``,
    gateway/review/sampling.py; the median of the others' for a sample without one), and
    by the share it stands for past :data:`MAX_SAMPLES` (the module docstring); with
    ``verifier_models``, only those one of these score scales scored (the verifier in
    force: one per language, ``GatewayVerifier.scale_ids``); with ``retrieval``, not
    those its embedder scored below its threshold (the module docstring)."""
    if isinstance(verifier_models, str):  # one id is not a collection of its letters
        raise TypeError("verifier_models is a collection of score scale ids, not one id")
    score = MisfireSample.verifier_score
    statement = (
        # the comparison's sampling record only (the whole one is ~9 KB a row decoded)
        select(MisfireSample.id, score, MisfireSample.label, sampling_record())
        .where(MisfireSample.tenant_id == tenant_id)
        .where(MisfireSample.label.is_not(None))
        # a probability (PostgreSQL keeps NaN, above every number, and ±inf): anything
        # else would take places in the lowest-scores window
        .where(score.is_not(None), score >= 0.0, score <= 1.0)
    )
    if verifier_models is not None:
        statement = statement.where(MisfireSample.verifier_model.in_(list(verifier_models)))
    if retrieval is not None:
        embedder = MisfireSample.embedder_id
        statement = statement.where(
            or_(
                embedder.is_(None),
                embedder != retrieval.embedder_id,
                MisfireSample.score >= retrieval.threshold - SIMILARITY_SLACK,
            )
        )
    newest = statement.order_by(MisfireSample.id.desc()).limit(MAX_SAMPLES)
    lowest = statement.order_by(score.asc(), MisfireSample.id.asc()).limit(MAX_SAMPLES)
    with Session(db) as s:
        windows = [list(s.execute(query)) for query in (newest, lowest)]
        read = {row[0]: row[1:] for window in windows for row in window}
        rows = [
            (float(value), label == "misfire", _weight({"sampling": drawn}))
            for _, (value, label, drawn) in sorted(read.items(), reverse=True)
            if value is not None and math.isfinite(value) and 0.0 <= value <= 1.0
        ]
        known = [w for _, _, w in rows if w is not None]
        typical = statistics.median_low(known) if known else 1.0
        labels = [Label(v, misfire, typical if w is None else w) for v, misfire, w in rows]
        # Both windows full: above the lowest window's top score only the newest were read.
        if all(len(w) >= MAX_SAMPLES for w in windows):
            top = float(windows[1][-1][1])
            labels = _standing_for_all(s, statement.where(score >= top), labels, top, typical)
    return labels


def _standing_for_all(
    s: Session, above: Any, labels: list[Label], top: float, typical: float
) -> list[Label]:
    """``labels`` with those scored ``top`` or more weighted so that, misfires and correct
    ones apart, they weigh what every such label of the tenant weighs (``above`` selects
    them all; read row by row, a few columns each: labels are human reviews, tens of
    thousands at most). Scaled by weight, not by count: a tenant that lowered its sample
    rate has newest labels that weigh more each than the older ones they stand for
    (a review: counted, the misfire rate of 11% read as 3.1%)."""
    total = {True: 0.0, False: 0.0}
    for _, _, label, drawn in s.execute(above.execution_options(yield_per=5000)):
        weight = _weight({"sampling": drawn})
        total[label == "misfire"] += typical if weight is None else weight
    read = {True: 0.0, False: 0.0}
    for x in labels:
        if x.score >= top:
            read[x.misfire] += x.weight
    share = {k: total[k] / read[k] if read[k] > 0.0 else 1.0 for k in read}
    return [x._replace(weight=x.weight * share[x.misfire]) if x.score >= top else x for x in labels]


def count_uncounted_labels(db: Engine, tenant_id: str, verifier_models: Collection[str]) -> int:
    """A tenant's labelled samples with a verifier score that ``load_labels`` leaves out
    for their scale: scored by a model no longer in force (a retrained one, another
    English dtype) or of no known one (before migration 0008, or a pair whose model
    could not be told; an exact repeat, stored at 1.0 with none, is not one). The report
    shows it, so a cut back at the shipped one after a retrain is not read as labels lost."""
    if isinstance(verifier_models, str):
        raise TypeError("verifier_models is a collection of score scale ids, not one id")
    model = MisfireSample.verifier_model
    return _count_scored(
        db,
        tenant_id,
        or_(model.is_(None), model.not_in(list(verifier_models))),
        # an exact repeat is served at 1.0 and read by no model (review/sampling.py):
        # no label on an old scale (before session 44 every labelled repeat counted)
        or_(model.is_not(None), MisfireSample.verifier_score != 1.0),
    )


def count_labels_below_threshold(
    db: Engine, tenant_id: str, verifier_models: Collection[str] | None, retrieval: Retrieval
) -> int:
    """A tenant's labelled, scored samples that ``load_labels`` leaves out for the
    retrieval threshold in force (its embedder's, below the threshold): the report
    shows them, so a cut back at the shipped one after a raised threshold is not read
    as labels lost."""
    if isinstance(verifier_models, str):
        raise TypeError("verifier_models is a collection of score scale ids, not one id")
    where = [
        MisfireSample.embedder_id == retrieval.embedder_id,
        MisfireSample.score < retrieval.threshold - SIMILARITY_SLACK,
    ]
    if verifier_models is not None:
        where.append(MisfireSample.verifier_model.in_(list(verifier_models)))
    return _count_scored(db, tenant_id, *where)


def _count_scored(db: Engine, tenant_id: str, *where: Any) -> int:
    """How many of the tenant's labelled samples with a verifier score meet ``where``."""
    statement = (
        select(func.count())
        .select_from(MisfireSample)
        .where(MisfireSample.tenant_id == tenant_id)
        .where(MisfireSample.label.is_not(None))
        .where(MisfireSample.verifier_score.is_not(None))
        .where(*where)
    )
    with Session(db) as s:
        return int(s.scalar(statement) or 0)


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


def lowest_misfire_similarity(
    db: Engine,
    tenant_id: str,
    verifier_models: Collection[str] | None,
    retrieval: Retrieval | None,
) -> float | None:
    """The lowest similarity among the misfires :func:`load_labels` counts under
    ``retrieval`` that its embedder scored; None without a retrieval or such a misfire.
    A floor those labels set holds while the threshold stays at or below it
    (gateway/calibration_ruled_out.py): raising it further removes a misfire."""
    if retrieval is None:
        return None
    if isinstance(verifier_models, str):
        raise TypeError("verifier_models is a collection of score scale ids, not one id")
    score = MisfireSample.verifier_score
    statement = select(func.min(MisfireSample.score)).where(
        MisfireSample.tenant_id == tenant_id,
        MisfireSample.label == "misfire",
        score.is_not(None),
        score >= 0.0,
        score <= 1.0,
        MisfireSample.embedder_id == retrieval.embedder_id,
        MisfireSample.score >= retrieval.threshold - SIMILARITY_SLACK,
    )
    if verifier_models is not None:
        statement = statement.where(MisfireSample.verifier_model.in_(list(verifier_models)))
    with Session(db) as s:
        value = s.scalar(statement)
    return float(value) if value is not None and math.isfinite(value) else None
