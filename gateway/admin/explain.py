"""A dry-run semantic lookup for one tenant: would this request hit, and if not, why?
(seed 003, 排查清单.)

It follows the request path step by step (tenant enabled → the pipeline's skip
rules → cacheable question → allowlist → guards → partition → nearest entries →
threshold → expiry → validators) with the tenant's current policy, and reports
each step, the partition key, the nearest entries with their scores, and the
entity comparison against the best candidate. It only *reads*: the index search
and the store's ``get_many``; nothing is served, no hit is counted, no expiry
moves and no expired entry is deleted.
"""

from __future__ import annotations

from typing import Any, Literal

from gateway.admin.cache import require_tenant, store_errors
from gateway.admin.schemas import ExplainCandidate, ExplainRequest, ExplainResponse, ExplainStep
from gateway.errors import BadRequestError
from gateway.proxy.pipeline import CacheControl, Pipeline
from gateway.tenants import TenantContext, TenantStore, utc_now
from protocol.errors import ApiError
from protocol.openai import parse_request
from semantic import SemanticCache, SemanticPolicy, SemanticQuery
from semantic.errors import InvalidRequestError
from semantic.index import check_vectors
from semantic.results import BELOW_THRESHOLD, EMPTY, EXPIRED
from semantic.store import StoredEntry
from validators import (
    Entities,
    InvalidTextError,
    ValidatorError,
    compare_entities,
    extract_entities,
)

VANISHED = "vanished"  # in the index, no longer in the database (another replica removed it)


class _Report:
    """The explanation as it is built, step by step."""

    def __init__(self, tenant_id: str, version: int, threshold: float) -> None:
        self.steps: list[ExplainStep] = []
        self.fields: dict[str, Any] = {
            "tenant_id": tenant_id,
            "policy_version": version,
            "threshold": threshold,
            "question": None,
            "partition_key": None,
            "partition_size": 0,
            "best_score": None,
            "served_entry_id": None,
            "candidates": [],
            "entity_comparison": None,
        }

    def step(self, check: str, passed: bool, detail: str | None = None) -> None:
        self.steps.append(ExplainStep(check=check, passed=passed, detail=detail))

    def done(
        self, decision: Literal["hit", "miss", "skipped"], reason: str | None
    ) -> ExplainResponse:
        return ExplainResponse(
            decision=decision,
            reason=reason,
            would_hit=decision == "hit",
            steps=self.steps,
            **self.fields,
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


class Explainer:
    def __init__(self, store: TenantStore, pipeline: Pipeline, models: list[str]) -> None:
        self.store = store
        self.pipeline = pipeline
        self.models = models

    def explain(self, tenant_id: str, req: ExplainRequest) -> ExplainResponse:
        tenant = require_tenant(self.store, tenant_id)
        policy, version = self.store.policy(tenant_id)
        ctx = TenantContext(tenant_id, tenant.name, policy, version)
        body = request_body(req, self.models)
        try:
            parse_request(body, chat=req.endpoint == "chat")  # as the route validates it
        except ApiError as err:
            raise BadRequestError(f"body: {err.message}", param=err.param, code=err.code) from None
        report = _Report(tenant_id, version, policy.threshold)
        report.step("tenant_enabled", not tenant.disabled)
        if tenant.disabled:
            return report.done("skipped", "tenant_disabled")
        model = body.get("model")
        report.step("model_served", model in self.models, str(model))
        skip = self.pipeline._skip_reason(ctx, body, CacheControl())  # the pipeline's own rules
        report.step("eligible", skip is None, skip)
        if skip is not None:
            return report.done("skipped", skip)
        cache = self.pipeline.cache
        assert cache is not None  # else the skip reason is "disabled"
        chat = req.endpoint == "chat"
        builder = SemanticQuery.from_chat if chat else SemanticQuery.from_completion
        try:
            query = builder(tenant=tenant_id, body=body, namespace=ctx.semantic_namespace)
        except InvalidRequestError as exc:
            report.step("cacheable", False, str(exc))
            return report.done("skipped", f"uncacheable:{exc}"[:120])
        report.step("cacheable", True)
        report.fields["question"] = query.question
        if policy.mode == "allowlist":
            listed = policy.is_allowlisted(query.question)
            report.step("allowlist", listed)
            if not listed:
                return report.done("skipped", "not_allowlisted")
        sem = policy.semantic_policy()
        try:
            guard = cache.validator.guard(query.question, sem.guards) if cache.validator else None
            report.step("guards", guard is None, guard)
            key = cache.partition_key(query)
            report.fields["partition_key"] = key
            if guard is not None:
                return report.done("miss", guard)
            with store_errors():
                return self._search(cache, query, key, req.top_k, sem, report)
        except InvalidTextError as exc:  # the question cannot be validated at all
            raise BadRequestError(f"question: {exc}", param="question") from None

    @staticmethod
    def _search(
        cache: SemanticCache,
        query: SemanticQuery,
        key: str,
        top_k: int,
        sem: SemanticPolicy,
        report: _Report,
    ) -> ExplainResponse:
        size = cache.index.size(key)
        report.fields["partition_size"] = size
        report.step("partition_not_empty", size > 0, key)
        if size == 0:
            return report.done("miss", EMPTY)
        vector = check_vectors(cache.embedder.embed([query.question]), cache.embedder.dim)[0]
        found = cache.index.search(key, vector, max(top_k, sem.top_k))
        rows = cache.entries.get_many(i for i, _ in found)  # reads only: no hit is recorded
        now = utc_now()
        question_entities = extract_entities(query.question)
        served: int | None = None  # the entry lookup() would serve
        refused: str | None = None  # the reason of the best candidate it would turn down
        candidates: list[ExplainCandidate] = []
        for rank, (entry_id, score) in enumerate(found):
            entry = rows.get(entry_id)
            if entry is None or entry.partition_key != key:
                reason: str | None = VANISHED
            elif entry.is_expired(now):
                reason = EXPIRED
            elif cache.validator is not None:
                reason = cache.validator.check(
                    query.question,
                    entry.question,
                    entry.entities,
                    score,
                    sem.entity_kinds,
                    sem.guards,
                )
            else:
                reason = None
            above = score >= sem.threshold
            if rank < sem.top_k and above and served is None:  # what lookup() does
                if reason is None:
                    served = entry_id
                elif reason != VANISHED and refused is None:
                    refused = reason
            if entry is None or reason == VANISHED:
                continue
            if report.fields["entity_comparison"] is None:  # the best live candidate
                comparison = compare_entities(question_entities, _entities(entry), sem.entity_kinds)
                report.fields["entity_comparison"] = {"entry_id": entry_id} | comparison.to_dict()
            candidates.append(
                ExplainCandidate(
                    entry_id=entry_id,
                    question=entry.question,
                    score=score,
                    above_threshold=above,
                    expired=reason == EXPIRED,
                    refusal=reason if above or reason == EXPIRED else BELOW_THRESHOLD,
                    hit_count=entry.hit_count,
                    expires_at=entry.expires_at,
                )
            )
        best = found[0][1] if found else None
        report.fields |= {"candidates": candidates, "best_score": best}
        report.step(
            "threshold",
            any(s >= sem.threshold for _, s in found[: sem.top_k]),
            f"best score {best} vs threshold {sem.threshold}",
        )
        if served is not None:
            report.fields["served_entry_id"] = served
            report.step("validators", True)
            return report.done("hit", None)
        if refused is not None:
            report.step("validators", False, refused)
            return report.done("miss", refused)
        return report.done("miss", BELOW_THRESHOLD if candidates else EMPTY)
