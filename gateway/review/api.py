"""The review queue API under ``/admin/review`` (admin token): list sampled semantic
hits, read one, label it ``correct`` or ``misfire`` with an optional note.

Labelling is an admin action: it is written to the audit log (``review.label``)
in the same transaction as the label. A sample may be relabelled; the audit
event keeps the previous label.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine, select
from sqlalchemy.orm import sessionmaker

from gateway.admin.audit import add_event
from gateway.admin.auth import require_admin
from gateway.admin.body_check import AdminRoute
from gateway.calibration_labels import recorded_probability
from gateway.calibration_ruled_out import forget_ruled_out
from gateway.errors import BadRequestError, NotFoundError
from gateway.metrics import GatewayMetrics
from gateway.models import MisfireSample, Tenant
from gateway.sync.log import log_tenant_change
from gateway.tenants import utc_now

LABELS = ("correct", "misfire")
REVIEW_LABEL = "review.label"
MAX_ID = 2_147_483_647
NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL


class ShadowOut(BaseModel):
    verdict: str | None
    similarity: float | None
    answer: str | None
    at: datetime | None


class SampleOut(BaseModel):
    id: int
    tenant_id: str
    created_at: datetime
    request_id: str
    entry_id: int | None
    partition_key: str
    question: str
    matched_question: str
    served_answer: str
    score: float
    threshold: float
    verifier_score: float | None = None
    verifier_model: str | None = None
    embedder_id: str | None = None  # whose scale ``score`` is on (None: before 0010)
    refines_cut: bool | None = Field(
        None,
        description="whether this sample, once labelled, counts for its tenant's verifier "
        "cut: scored on a scale in force (a retrained model's samples stop counting); "
        "null with the verifier off",
    )
    entity_comparison: dict[str, Any] | None
    label: str | None
    note: str | None
    labeled_at: datetime | None
    labeled_by: str | None
    shadow: ShadowOut

    @classmethod
    def of(cls, row: MisfireSample, in_force: Collection[str] | None = None) -> SampleOut:
        """``in_force``: the verifier's score scales (``GatewayVerifier.scale_ids``),
        None with the verifier off."""
        score = row.verifier_score
        refines = None
        if in_force is not None:
            # what gateway/calibration_labels.py load_labels reads
            probability = score is not None and math.isfinite(score) and 0.0 <= score <= 1.0
            refines = probability and row.verifier_model in in_force
        return cls(
            id=row.id,
            tenant_id=row.tenant_id,
            created_at=row.created_at,
            request_id=row.request_id,
            entry_id=row.entry_id,
            partition_key=row.partition_key,
            question=row.question,
            matched_question=row.matched_question,
            served_answer=row.served_answer,
            score=row.score,
            threshold=row.threshold,
            verifier_score=row.verifier_score,
            verifier_model=row.verifier_model,
            embedder_id=row.embedder_id,
            refines_cut=refines,
            entity_comparison=row.entity_comparison,
            label=row.label,
            note=row.note,
            labeled_at=row.labeled_at,
            labeled_by=row.labeled_by,
            shadow=ShadowOut(
                verdict=row.shadow_verdict,
                similarity=row.shadow_similarity,
                answer=row.shadow_answer,
                at=row.shadow_at,
            ),
        )


class SampleList(BaseModel):
    object: Literal["list"] = "list"
    data: list[SampleOut]
    next_before_id: int | None = Field(
        None, description="pass as before_id to get the next (older) page; null on the last page"
    )


class LabelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Checked in label_sample for its own error code (bad_label); bounded here so that
    # what reaches it is short and free of NUL.
    label: str = Field(max_length=16, pattern=NO_NUL, description="correct or misfire")
    note: str | None = Field(None, max_length=4000, pattern=NO_NUL)


def _sessions(request: Request) -> sessionmaker[Any]:
    db: Engine = request.app.state.db
    return sessionmaker(db, expire_on_commit=False)


def list_samples(
    sessions: sessionmaker[Any],
    tenant: str | None,
    status: str,
    limit: int,
    before_id: int | None,
    in_force: Collection[str] | None = None,
) -> SampleList:
    statement = select(MisfireSample).order_by(MisfireSample.id.desc()).limit(limit + 1)
    if tenant is not None:
        statement = statement.where(MisfireSample.tenant_id == tenant)
    if status == "pending":
        statement = statement.where(MisfireSample.label.is_(None))
    elif status == "labeled":
        statement = statement.where(MisfireSample.label.is_not(None))
    if before_id is not None:
        statement = statement.where(MisfireSample.id < before_id)
    with sessions() as s:
        rows = list(s.scalars(statement))
    more = len(rows) > limit
    rows = rows[:limit]
    return SampleList(
        data=[SampleOut.of(r, in_force) for r in rows], next_before_id=rows[-1].id if more else None
    )


def get_sample(
    sessions: sessionmaker[Any], sample_id: int, in_force: Collection[str] | None = None
) -> SampleOut:
    with sessions() as s:
        row = s.get(MisfireSample, sample_id)
        if row is None:
            raise NotFoundError(f"no misfire sample with id {sample_id}", code="sample_not_found")
        return SampleOut.of(row, in_force)


def label_sample(
    sessions: sessionmaker[Any],
    sample_id: int,
    label: str,
    note: str | None,
    actor: str,
    in_force: Collection[str] | None = None,
) -> SampleOut:
    return relabel_sample(sessions, sample_id, label, note, actor, in_force).sample


#: The misfire-rate alert's window (deploy/prometheus/alerts.yml, ``[24h]``): a relabel
#: withdraws the earlier label from the alert's counts only if that label was given
#: within it; an older one was never in the window's counts to take out.
ALERT_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class Relabel:
    sample: SampleOut
    previous: str | None  # the label before (None: unlabelled)
    recent: bool  # that label was given within ALERT_WINDOW


def relabel_sample(
    sessions: sessionmaker[Any],
    sample_id: int,
    label: str,
    note: str | None,
    actor: str,
    in_force: Collection[str] | None = None,
) -> Relabel:
    """:func:`label_sample`, with the label the sample had before and whether it was
    given within :data:`ALERT_WINDOW`."""
    if label not in LABELS:
        raise BadRequestError(
            f"label must be one of {list(LABELS)}", param="label", code="bad_label"
        )
    with sessions.begin() as s:
        row = s.get(MisfireSample, sample_id)
        if row is None:
            raise NotFoundError(f"no misfire sample with id {sample_id}", code="sample_not_found")
        previous = row.label
        given_at = row.labeled_at
        if previous is not None and previous != label:  # the evidence changed: read afresh
            # after a floor being saved from the labels before (calibration_ruled_out.py)
            s.get(Tenant, row.tenant_id, with_for_update=True)
            if previous == "misfire":  # withdrawn evidence; a new misfire rules out more
                score = row.verifier_score
                forget_ruled_out(s, row.tenant_id, from_score=score if score is not None else 0.0)
            log_tenant_change(s, row.tenant_id)  # every replica's cut is read again
        row.label, row.note = label, note
        row.labeled_at, row.labeled_by = utc_now(), actor[:255]
        details: dict[str, Any] = {"label": label, "previous": previous, "score": row.score}
        add_event(s, actor, REVIEW_LABEL, row.tenant_id, f"sample:{sample_id}", details)
        s.flush()
        recent = given_at is not None and utc_now() - _aware(given_at) <= ALERT_WINDOW
        return Relabel(SampleOut.of(row, in_force), previous, recent)


def _target_of(request: Request, tenant_id: str) -> float | None:
    """The tenant's ``target_misfire_rate``; None when its policy cannot be read (the
    count above stands; the alert then keeps the target it had, or 1%)."""
    try:
        policy, _version = request.app.state.gateway.tenants.policy(tenant_id)
    except Exception:
        return None
    return float(policy.target_misfire_rate)


def _aware(at: datetime) -> datetime:
    """SQLite gives back naive datetimes; every stored time is UTC."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _is_gone(sessions: sessionmaker[Any], tenant_id: str) -> bool:
    with sessions() as s:
        return s.get(Tenant, tenant_id) is None


def _calibrator(request: Request) -> Any:
    """The verifier's calibrator; None with the verifier off."""
    gateway = getattr(request.app.state, "gateway", None)
    verification = getattr(getattr(gateway, "pipeline", None), "verification", None)
    return getattr(verification, "calibrator", None)


def _in_force(request: Request) -> tuple[str, ...] | None:
    """The verifier's score scales in force; None with the verifier off."""
    gateway = getattr(request.app.state, "gateway", None)
    pipeline = getattr(gateway, "pipeline", None)
    verification = getattr(pipeline, "verification", None)
    return None if verification is None else tuple(verification.verifier.scale_ids)


def review_router(admin: Any = require_admin) -> APIRouter:
    """The review routes; ``admin`` is the FastAPI dependency that returns the actor."""
    # a database that cannot answer is a 503, as on the other admin routes
    router = APIRouter(prefix="/admin/review", tags=["review"], route_class=AdminRoute)

    @router.get("/samples", response_model=SampleList)
    async def samples(
        request: Request,
        tenant: str | None = Query(
            None, max_length=64, pattern=NO_NUL, description="only this tenant"
        ),
        status: Literal["pending", "labeled", "all"] = Query("pending"),
        limit: int = Query(50, ge=1, le=500),
        before_id: int | None = Query(None, ge=1, le=MAX_ID),
        _actor: str = Depends(admin),
    ) -> SampleList:
        """Sampled semantic hits, newest first (pending ones by default)."""
        return await asyncio.to_thread(
            list_samples, _sessions(request), tenant, status, limit, before_id, _in_force(request)
        )

    @router.get("/samples/{sample_id}", response_model=SampleOut)
    async def sample(
        request: Request,
        sample_id: int = Path(ge=1, le=MAX_ID),
        _actor: str = Depends(admin),
    ) -> SampleOut:
        return await asyncio.to_thread(
            get_sample, _sessions(request), sample_id, _in_force(request)
        )

    @router.post("/samples/{sample_id}/label", response_model=SampleOut)
    async def label(
        request: Request,
        body: LabelIn,
        sample_id: int = Path(ge=1, le=MAX_ID),
        actor: str = Depends(admin),
    ) -> SampleOut:
        """Label a sample ``correct`` or ``misfire`` (400 for anything else, 404 unknown id)."""
        relabel = await asyncio.to_thread(
            relabel_sample,
            _sessions(request),
            sample_id,
            body.label,
            body.note,
            str(actor),
            _in_force(request),
        )
        # Counted once committed, so a refused label never moves the misfire-rate alert;
        # then, if the tenant was deleted meanwhile, its series go again (the delete's
        # own forget may have run before this count brought them back: a review).
        metrics: GatewayMetrics = request.app.state.gateway.metrics
        out, previous = relabel.sample, relabel.previous
        weight = 1.0 / (recorded_probability(out.entity_comparison) or 1.0)
        if previous != body.label:  # the same label again changes no count
            metrics.misfire_labels.labels(out.tenant_id, body.label).inc()
            metrics.misfire_labels_weighted.labels(out.tenant_id, body.label).inc(weight)
            # the earlier label withdrawn, where the alert's window still counts it
            if previous is not None and relabel.recent:
                metrics.misfire_labels_withdrawn.labels(out.tenant_id, previous).inc()
                metrics.misfire_labels_withdrawn_weighted.labels(out.tenant_id, previous).inc(
                    weight
                )
            # the bound the alert compares this tenant's rate with (read again when the
            # feed followed a policy change meanwhile, which the older read would undo)
            for _ in range(3):
                read_at = metrics.target_changes
                target = await asyncio.to_thread(_target_of, request, out.tenant_id)
                if target is None or metrics.set_misfire_target(out.tenant_id, target, read_at):
                    break
        if await asyncio.to_thread(_is_gone, _sessions(request), out.tenant_id):
            metrics.forget_tenant(out.tenant_id)
        # This replica reads the tenant's labels again at its next lookup (a relabel
        # may have deleted its ruled-out floors); others within their cut's ttl.
        calibrator = _calibrator(request)
        if calibrator is not None:
            calibrator.invalidate(out.tenant_id)
        return out

    return router
