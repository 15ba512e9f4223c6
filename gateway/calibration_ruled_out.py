"""The verifier cut below which a tenant's labels ruled every range out, kept in the
database (issue 12, part 3; table ``verifier_ruled_out``, migration 0013).

:func:`gateway.calibration.tenant_cut` raises a tenant's cut above every score range
its labels disprove, and reports that floor as ``band_cut``. From labels alone the
floor can fall again: samples taken before a raise and labelled after it land *below*
the disproved range, shift the bands it is tested in, and the range is served again
(a review, session 40). :class:`gateway.calibrator.Calibrator` therefore keeps the
highest floor per tenant, target, score scale and evidence here, and passes it back as
``kept``: every replica, and a replica after a restart, reads it with the labels.

The floor only rises while the labels stay as they were. A misfire relabelled
correct deletes, in the same transaction, the tenant's floors at or above its score
(the evidence of a range below them may be gone: the labels are read afresh and give
what they now give); a sample relabelled misfire deletes none, since more misfires
rule out no less (before session 44 any relabel deleted every floor, so a reviewer
finding one more misfire could lower the cut and re-serve a disproved range).
Deleting the tenant deletes them too, so a tenant re-created under the id starts with
none.

Labels of hits below the retrieval threshold in force do not count
(gateway/calibration_labels.py), so a floor is kept with the evidence it rests on
(migration 0016): the lowest similarity among the misfires it was computed from that
the embedder in force scored, ``"<similarity>@<embedder id>"``. It holds while every
one of those misfires still counts: under that embedder, at a threshold no higher than
that similarity; under any other embedder, whose lookups count that one's labels
whatever their similarity (:func:`applies`). So a tenant that raises its threshold past
a misfire gets the cut its remaining labels give (before session 48 the floor it had
set stayed), while a raise past no misfire, or a new embedder, leaves the floor as it
was (a first version keyed by the threshold alone dropped it there: a review). A floor
whose misfires the embedder did not score, and those kept before migration 0016, hold
everywhere (``"*"``).

A floor is saved only from labels that are still the tenant's (``labels_mark`` before
they were read, the same inside the save, under a share lock of the tenant's row that a
relabel and a delete take exclusively): before session 43 a refresh that read the
labels before a delete or a relabel committed saved its floor after, and the tenant
re-created under the id (or the relabelled one) got a cut raised by labels it no longer
had (a review). A stricter target keeps a looser one's floor too
(:func:`load_ruled_out`).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from sqlalchemy import Engine, case, delete, func, select
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from gateway.calibration_labels import SIMILARITY_SLACK, Retrieval
from gateway.models import MisfireSample, Tenant, VerifierRuledOut
from gateway.tenants import utc_now

#: What a tenant's labels were when read: how many, how many are misfires and the sum
#: of their ids (a relabel either way moves both), and the newest label's time;
#: ``None`` for a tenant that does not exist. Not the time alone: a relabel stamps its
#: replica's clock, and one running behind left the newest time, and the mark, as they
#: were, so a floor from the labels before the relabel was saved after it (a review,
#: session 46).
LabelsMark = tuple[int, int, int, Any] | None

#: The key of "every score scale" (a calibrator reading every scored sample).
ALL_SCALES = "*"
#: The evidence key of a floor that holds under every retrieval (its misfires were not
#: scored by the embedder in force, no retrieval was given, or it was kept before
#: migration 0016).
ALL_LABELS = "*"


def scales_key(verifier_models: Collection[str] | None) -> str:
    """The score scales in force as one key: sorted, joined by ","."""
    if verifier_models is None:
        return ALL_SCALES
    if isinstance(verifier_models, str):  # one id is not a collection of its letters
        raise TypeError("verifier_models is a collection of score scale ids, not one id")
    return ",".join(sorted(set(verifier_models)))[:255]


def evidence_key(retrieval: Retrieval | None, lowest_misfire: float | None) -> str:
    """The key of a floor computed under ``retrieval`` whose misfires that its embedder
    scored lie at ``lowest_misfire`` similarity or above (``"*"``: no such misfire).
    Rounded down to the micro, so a rounding never drops a floor that holds."""
    if retrieval is None or lowest_misfire is None or not math.isfinite(lowest_misfire):
        return ALL_LABELS
    micros = math.floor(lowest_misfire * 1_000_000)
    return f"{micros / 1_000_000:.6f}@{retrieval.embedder_id}"[:255]


def applies(evidence: str, retrieval: Retrieval | None) -> bool:
    """Whether a floor of key ``evidence`` holds under ``retrieval``: every misfire it
    was computed from still counts there (module docstring). Under its embedder the
    threshold must not exceed the lowest of them (labels count from the threshold less
    ``SIMILARITY_SLACK``); under another, or without a retrieval, they all count. An
    unreadable key holds everywhere."""
    if evidence == ALL_LABELS or retrieval is None:
        return True
    similarity, at, embedder = evidence.partition("@")
    try:
        lowest = float(similarity)
    except ValueError:
        return True
    if not at or not math.isfinite(lowest):
        return True
    if embedder != retrieval.embedder_id[: 255 - len(similarity) - 1]:  # as the key cut it
        return True  # another embedder's lookups count these misfires whatever their similarity
    # the stored similarity is rounded down by up to a micro: kept one micro longer
    return retrieval.threshold - SIMILARITY_SLACK <= lowest + 1e-6


def load_ruled_out(
    db: Engine,
    tenant_id: str,
    target: float,
    verifier_models: Collection[str] | None,
    retrieval: Retrieval | None = None,
) -> float:
    """The highest floor kept for the tenant and scales at ``target`` or a looser one
    (too many misfires for 2% are too many for 1%: before session 44 a tenant that
    tightened its target got a cut below the range its 2% labels had kept ruled out),
    among those that hold under ``retrieval`` (:func:`applies`); 0.0 when none (or
    unusable)."""
    statement = select(VerifierRuledOut.band_cut, VerifierRuledOut.evidence).where(
        VerifierRuledOut.tenant_id == tenant_id,
        VerifierRuledOut.target >= target,
        VerifierRuledOut.scales == scales_key(verifier_models),
    )
    with Session(db) as s:
        rows = s.execute(statement).all()
    held = [
        float(cut)
        for cut, under in rows
        if cut is not None and math.isfinite(cut) and applies(under, retrieval)
    ]
    return min(1.0, max(0.0, max(held, default=0.0)))


def _mark(s: Session, tenant_id: str) -> LabelsMark:
    if s.get(Tenant, tenant_id) is None:
        return None
    misfire = MisfireSample.label == "misfire"
    statement = select(
        func.count(),
        func.sum(case((misfire, 1), else_=0)),
        func.sum(case((misfire, MisfireSample.id), else_=0)),
        func.max(MisfireSample.labeled_at),
    ).where(MisfireSample.tenant_id == tenant_id, MisfireSample.label.is_not(None))
    count, misfires, ids, newest = s.execute(statement).one()
    return int(count), int(misfires or 0), int(ids or 0), newest


def labels_mark(db: Engine, tenant_id: str) -> LabelsMark:
    """The tenant's labels as they are now, to read before they are (``save_ruled_out``)."""
    with Session(db) as s:
        return _mark(s, tenant_id)


def save_ruled_out(
    db: Engine,
    tenant_id: str,
    target: float,
    verifier_models: Collection[str] | None,
    band_cut: float,
    mark: LabelsMark,
    evidence: str = ALL_LABELS,
) -> bool:
    """Keep ``band_cut`` as the floor of key ``evidence`` (:func:`evidence_key`) unless a
    higher one is kept already (another replica may have written meanwhile: the higher
    of the two stays); False, and nothing kept, when the tenant's labels are no longer
    those marked before the floor was computed from them (relabelled, deleted, the
    tenant gone or re-created)."""
    key = (tenant_id, target, scales_key(verifier_models), evidence[:255])
    for attempt in (1, 2):
        try:
            with Session(db) as s, s.begin():
                # shared: two replicas save at once; a relabel or a delete waits
                if s.get(Tenant, tenant_id, with_for_update={"read": True}) is None:
                    return False
                if mark is None or _mark(s, tenant_id) != mark:
                    return False
                row = s.get(VerifierRuledOut, key, with_for_update=True)
                if row is None:
                    s.add(
                        VerifierRuledOut(
                            tenant_id=key[0],
                            target=key[1],
                            scales=key[2],
                            evidence=key[3],
                            band_cut=band_cut,
                            updated_at=utc_now(),
                        )
                    )
                elif band_cut > row.band_cut:
                    row.band_cut, row.updated_at = band_cut, utc_now()
            return True
        except sa_exc.IntegrityError:  # inserted by another replica at once: update it
            if attempt == 2:
                raise
    return False  # not reached: the second attempt returns or raises


def forget_ruled_out(session: Session, tenant_id: str, *, from_score: float | None = None) -> None:
    """Delete the tenant's floors, in the caller's transaction: all of them (the tenant
    is deleted), or with ``from_score`` those at or above it (a misfire at that score
    relabelled correct: only a range below a floor held it as evidence)."""
    statement = delete(VerifierRuledOut).where(VerifierRuledOut.tenant_id == tenant_id)
    if from_score is not None:
        statement = statement.where(VerifierRuledOut.band_cut >= from_score)
    session.execute(statement)
