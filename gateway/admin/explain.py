"""A dry-run semantic lookup for one tenant: would this request hit, and if not, why?
(seed 003, 排查清单.)

Explain *is* the lookup: it runs the pipeline's own lookup with ``trace=True``
(:meth:`gateway.proxy.pipeline.Pipeline.lookup`, then
:meth:`semantic.SemanticCache.lookup`) and renders the trace they return: every
step (the skip rules, cacheable question, allowlist, guards, partition, nearest
entries, threshold, expiry, validators, judge), the partition key, the nearest
entries with their scores (and the pair verifier's score with the cut in force,
when the verifier is on), and the entity comparison against the best candidate.
No rule is written here, so the report cannot drift from what serving does. A
traced lookup only reads: nothing is served, no hit is counted, no expiry moves
and no expired entry is deleted. Only the checks before the pipeline (the tenant
is enabled, the model is served) are this module's, as authentication and the
route make them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from typing import Any, Literal

from gateway.admin.cache import require_tenant, store_errors
from gateway.admin.schemas import ExplainCandidate, ExplainRequest, ExplainResponse, ExplainStep
from gateway.errors import BadRequestError
from gateway.proxy.controls import take_cache_controls
from gateway.proxy.pipeline import Pipeline
from gateway.tenants import TenantContext, TenantStore
from protocol.errors import ApiError
from protocol.openai import parse_request
from semantic.store import StoredEntry
from semantic.trace import LookupTrace, TraceCandidate
from validators import (
    Entities,
    InvalidTextError,
    ValidatorError,
    compare_entities,
    extract_entities,
    pair_mismatch,
)


def request_body(req: ExplainRequest, models: list[str]) -> dict[str, Any]:
    if req.body is not None:
        return dict(req.body)
    model = req.model or (models[0] if models else "default")
    if req.endpoint == "completion":
        return {"model": model, "prompt": req.question}
    return {"model": model, "messages": [{"role": "user", "content": req.question}]}


def _entities(entry: StoredEntry) -> Entities:
    if entry.entities is not None:
        try:
            return Entities.from_dict(entry.entities)
        except ValidatorError:
            pass  # stale or corrupt: the question text is the ground truth (as the validator)
    return extract_entities(entry.question)


def _entity_comparison(
    question: str | None, candidates: list[TraceCandidate], kinds: Collection[str] | None
) -> dict[str, Any] | None:
    """The question's entities against the best live candidate's, kind by kind."""
    live = next((c for c in candidates if c.entry is not None), None)
    if question is None or live is None or live.entry is None:
        return None
    entry = live.entry
    comparison = compare_entities(extract_entities(question), _entities(entry), kinds)
    shown = {"entry_id": entry.id} | comparison.to_dict() | {"pair_check": None}
    if comparison.mismatch_kind is not None:  # the pair checks run only after the kinds
        return shown
    # A check of the two texts together ("two cards on one account" / "one card on two
    # accounts"): the kind the refusal names, which no kind's values show (session 49;
    # ``kinds`` keeps each kind's comparison of values).
    pair = pair_mismatch(question, entry.question, kinds)
    if pair is not None:
        shown |= {"matches": False, "mismatch_kind": pair[0], "mismatches": [pair[0]]}
        shown["pair_check"] = pair[1]
    return shown


def _candidate(c: TraceCandidate, unread: Mapping[int, str]) -> ExplainCandidate:
    assert c.entry is not None
    return ExplainCandidate(
        entry_id=c.entry_id,
        question=c.entry.question,
        score=c.score,
        above_threshold=c.above_threshold,
        expired=c.refusal == "expired",
        refusal=c.refusal,
        verifier_score=c.verifier_score,
        verifier_unread=unread.get(c.entry_id),
        hit_count=c.entry.hit_count,
        expires_at=c.entry.expires_at,
    )


class Explainer:
    def __init__(self, store: TenantStore, pipeline: Pipeline, models: list[str]) -> None:
        self.store = store
        self.pipeline = pipeline
        self.models = models

    async def explain(self, tenant_id: str, req: ExplainRequest) -> ExplainResponse:
        tenant = await asyncio.to_thread(require_tenant, self.store, tenant_id)
        policy, version = await asyncio.to_thread(self.store.policy, tenant_id)
        body = request_body(req, self.models)
        try:
            # As the route: `cache` leaves the body before it is read (its namespace
            # narrows the partition, its max-age the candidates; left in, it changed
            # the partition key explained, and a malformed one was explained at all).
            cc = take_cache_controls(body, None)
            parse_request(body, chat=req.endpoint == "chat")  # as the route validates it
        except ApiError as err:
            raise BadRequestError(f"body: {err.message}", param=err.param, code=err.code) from None
        steps = [ExplainStep(check="tenant_enabled", passed=not tenant.disabled)]
        # What a lookup would apply, also when the request stops before the search.
        applied, setting = self.pipeline.threshold_in_force(policy)
        fields: dict[str, Any] = {
            "tenant_id": tenant_id,
            "policy_version": version,
            "threshold": applied,
            "threshold_setting": setting,
        }
        if tenant.disabled:  # authentication refuses its keys before any lookup
            return _render("skipped", "tenant_disabled", fields, steps, LookupTrace(), None)
        model = body.get("model")
        steps.append(
            ExplainStep(check="model_served", passed=model in self.models, detail=str(model))
        )
        # the minted id too: explain looks in the namespace the tenant's requests use
        ctx = TenantContext(tenant_id, tenant.name, policy, version, tenant.namespace_id or "")
        try:
            with store_errors():
                # the user the operator names, else the body's: under semantic_scope
                # "user" a lookup without one is skipped (no_user), explained or not
                said = body.get("user")
                user = req.user or (said if isinstance(said, str) and said else None)
                decision = await self.pipeline.lookup(
                    ctx, req.endpoint, body, cc, trace=True, show=req.top_k, user=user
                )
        except InvalidTextError as exc:  # the question cannot be validated at all
            raise BadRequestError(f"question: {exc}", param="question") from None
        assert decision.trace is not None  # a traced lookup always carries its trace
        comparison = await asyncio.to_thread(  # regular expressions over user text
            _entity_comparison,
            decision.trace.question,
            decision.trace.candidates,
            policy.semantic_policy().entity_kinds,
        )
        unread = await asyncio.to_thread(self._unread, decision.trace)
        return _render(
            decision.status, decision.reason, fields, steps, decision.trace, comparison, unread
        )

    def _unread(self, trace: LookupTrace) -> dict[int, str]:
        """entry id -> why the verifier refused that pair unread, for the candidates it
        scored 0 (the lookup's scores alone do not say why)."""
        verification = self.pipeline.verification
        if verification is None or trace.question is None:
            return {}
        out: dict[int, str] = {}
        for c in trace.candidates:
            if c.entry is not None and c.verifier_score == 0.0:
                scope = trace.partition_key or ""
                reason = verification.verifier.unread_reason(
                    trace.question, c.entry.question, scope
                )
                if reason is not None:
                    out[c.entry_id] = reason
        return out


def _render(
    status: Literal["hit", "miss", "skipped"],
    reason: str | None,
    fields: dict[str, Any],
    steps: list[ExplainStep],
    trace: LookupTrace,
    comparison: dict[str, Any] | None,
    unread: Mapping[int, str] | None = None,
) -> ExplainResponse:
    steps = steps + [
        ExplainStep(check=s.check, passed=s.passed, detail=s.detail) for s in trace.steps
    ]
    return ExplainResponse(
        decision=status,
        reason=reason,
        would_hit=status == "hit",
        steps=steps,
        question=trace.question,
        partition_key=trace.partition_key,
        partition_size=trace.partition_size,
        best_score=trace.best_score,
        # A hit the judge refused names no served entry: serving would not serve it.
        served_entry_id=trace.served_entry_id if status == "hit" else None,
        # The report shows live entries only: a vanished one has no row to describe.
        candidates=[_candidate(c, unread or {}) for c in trace.candidates if c.entry is not None],
        entity_comparison=comparison,
        verifier_cut=trace.verifier_cut,
        # The threshold the lookup applied (with the verifier on: the retrieval threshold).
        **(fields | ({} if trace.threshold is None else {"threshold": trace.threshold})),
    )
