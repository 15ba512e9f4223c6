"""Re-tags the misfire samples scored before session 35 with their language's score
scale.

Until session 35 a sample's ``verifier_model`` was one id for both languages' models
(the hash of both weights; ``GatewayVerifier.legacy_scale_id``). While those weights
are in force, such a sample was scored by today's model of its pair's language, so it
is re-tagged once with that language's id (``GatewayVerifier.scale_id_of``): a later
retrain of one language then drops only that language's labels, the old ones
included. Calibration reads the legacy id too, so nothing counts differently while
this runs; it only makes the old labels outlive the next retrain.

Samples under another legacy id (other weights) are left alone: they already count
for nothing. A pair neither model reads keeps the legacy id. Idempotent and safe to
run on every replica at once (each update re-checks the id it replaces).
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from gateway.models import MisfireSample
from gateway.review.sampling import ScaleOf

log = logging.getLogger("cachegate.gateway.review")


def retag_legacy_samples(
    db: Engine,
    legacy_id: str,
    scale_of: ScaleOf,
    *,
    batch_size: int = 500,
    stop: threading.Event | None = None,
) -> int:
    """Re-tag every sample stored under ``legacy_id``; returns how many were re-tagged.
    ``stop``: checked between batches (the gateway stopping)."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    retagged, after = 0, 0
    while stop is None or not stop.is_set():
        statement = (
            select(
                MisfireSample.id,
                MisfireSample.tenant_id,
                MisfireSample.question,
                MisfireSample.matched_question,
            )
            .where(MisfireSample.verifier_model == legacy_id, MisfireSample.id > after)
            .order_by(MisfireSample.id)
            .limit(batch_size)
        )
        with Session(db) as s:
            rows = s.execute(statement).all()
        if not rows:
            break
        moves: dict[str, list[int]] = {}
        for sample_id, tenant_id, question, matched in rows:
            try:  # language reads remembered per tenant, as the sampler's
                new = scale_of(question, matched, f"review:{tenant_id}")
            except Exception:  # an unreadable pair (empty, too long): keeps the legacy id
                new = None
            if new is not None and new != legacy_id:
                moves.setdefault(new, []).append(int(sample_id))
        with Session(db) as s, s.begin():
            for new, ids in moves.items():
                result = s.execute(
                    update(MisfireSample)
                    .where(MisfireSample.id.in_(ids), MisfireSample.verifier_model == legacy_id)
                    .values(verifier_model=new)
                )
                retagged += max(0, int(getattr(result, "rowcount", 0) or 0))
        after = int(rows[-1][0])
    return retagged


def retag_in_background(
    db: Engine, legacy_id: str, scale_of: ScaleOf, stop: threading.Event
) -> None:
    """``retag_legacy_samples`` for the gateway's start: logs what it did, and a failure
    (the database away) is only logged: the legacy id keeps counting meanwhile, and
    the next start tries again."""
    try:
        retagged = retag_legacy_samples(db, legacy_id, scale_of, stop=stop)
    except Exception as exc:
        log.warning("misfire samples not re-tagged by language (%s)", type(exc).__name__)
        return
    if retagged:
        log.info("misfire samples re-tagged with their language's score scale: %d", retagged)
