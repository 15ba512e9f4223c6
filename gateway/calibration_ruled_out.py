"""The verifier cut below which a tenant's labels ruled every range out, kept in the
database (issue 12, part 3; table ``verifier_ruled_out``, migration 0013).

:func:`gateway.calibration.tenant_cut` raises a tenant's cut above every score range
its labels disprove, and reports that floor as ``band_cut``. From labels alone the
floor can fall again: samples taken before a raise and labelled after it land *below*
the disproved range, shift the bands it is tested in, and the range is served again
(a review, session 40). :class:`gateway.calibrator.Calibrator` therefore keeps the
highest floor per tenant, target and score scale here, and passes it back as
``kept``: every replica, and a replica after a restart, reads it with the labels.

The floor only rises while the labels stay as they were. A label that changes (a
sample relabelled) deletes the tenant's floors in the same transaction: the labels
are read afresh and give what they now give. Deleting the tenant deletes them too, so
a tenant re-created under the id starts with none.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from sqlalchemy import Engine, delete, select
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from gateway.models import VerifierRuledOut
from gateway.tenants import utc_now

#: The key of "every score scale" (a calibrator reading every scored sample).
ALL_SCALES = "*"


def scales_key(verifier_models: Collection[str] | None) -> str:
    """The score scales in force as one key: sorted, joined by ","."""
    if verifier_models is None:
        return ALL_SCALES
    if isinstance(verifier_models, str):  # one id is not a collection of its letters
        raise TypeError("verifier_models is a collection of score scale ids, not one id")
    return ",".join(sorted(set(verifier_models)))[:255]


def load_ruled_out(
    db: Engine, tenant_id: str, target: float, verifier_models: Collection[str] | None
) -> float:
    """The floor kept for the tenant, target and scales; 0.0 when none (or unusable)."""
    statement = select(VerifierRuledOut.band_cut).where(
        VerifierRuledOut.tenant_id == tenant_id,
        VerifierRuledOut.target == target,
        VerifierRuledOut.scales == scales_key(verifier_models),
    )
    with Session(db) as s:
        value = s.scalar(statement)
    if value is None or not math.isfinite(value):
        return 0.0
    return min(1.0, max(0.0, float(value)))


def save_ruled_out(
    db: Engine,
    tenant_id: str,
    target: float,
    verifier_models: Collection[str] | None,
    band_cut: float,
) -> None:
    """Keep ``band_cut`` as the floor unless a higher one is kept already (another
    replica may have written meanwhile: the higher of the two stays)."""
    key = (tenant_id, target, scales_key(verifier_models))
    for attempt in (1, 2):
        try:
            with Session(db) as s, s.begin():
                row = s.get(VerifierRuledOut, key, with_for_update=True)
                if row is None:
                    s.add(
                        VerifierRuledOut(
                            tenant_id=key[0],
                            target=key[1],
                            scales=key[2],
                            band_cut=band_cut,
                            updated_at=utc_now(),
                        )
                    )
                elif band_cut > row.band_cut:
                    row.band_cut, row.updated_at = band_cut, utc_now()
            return
        except sa_exc.IntegrityError:  # inserted by another replica at once: update it
            if attempt == 2:
                raise


def forget_ruled_out(session: Session, tenant_id: str) -> None:
    """Delete the tenant's floors, in the caller's transaction (a label changed, or
    the tenant is deleted)."""
    session.execute(delete(VerifierRuledOut).where(VerifierRuledOut.tenant_id == tenant_id))
