"""Misfire sampling: a fraction of semantic hits goes to a human review queue
(seed 003: 高阈值 + 人工标注验证, 语义缓存抽样人工核验（误命中率）).

**Sampling rule** (``sample_probability``): a hit is sampled with the tenant's
``policy.sample_rate``; hits that scored just above the threshold the lookup ran
with (the policy's; with the pair verifier on, the retrieval threshold in force, also
the one stored with the sample; ``score < threshold + BOOST_BAND``, 0.03) are where
misfires live, so they are
sampled at ``min(1, sample_rate × BOOST_FACTOR)`` (×3). A rate of 0 samples
nothing. The probability actually used is stored with the sample (in
``entity_comparison["sampling"]``), so a later analysis can weight samples by
``1/probability`` if it wants an unbiased estimate over all hits.

A sampled hit is written to ``misfire_samples`` (tenant, question, matched
question, served answer, score, threshold, the entity comparison of the two
questions under ``entity_comparison["questions"]``, entry id, partition key,
time, and the pair verifier's score when it ran, with the identity of the score scale
of the model that read the pair, English or Chinese, none for an exact repeat, which
no model read: gateway/calibration.py refines the tenant's verifier cut from the
labelled ones the models in force scored) by a background task: the hit's response
never waits for it.

**Shadow verification** (``CACHEGATE_SHADOW_VERIFICATION``): after writing the
sample, the same task asks the upstream for a fresh answer to the same body
(straight to ``Upstream.stream``: no semantic lookup, never backfilled) and
compares it with the served answer: cosine similarity of the two answers'
embeddings (the semantic cache's embedder) and the entity validators on the
answers (``entity_comparison["answers"]``). Verdict ``agree`` when the similarity is
at least ``min_similarity`` (default 0.80, a MiniLM cosine, put on e5's scale where e5
compares: :mod:`gateway.review.shadow`) and the answers' entities match, else
``disagree``; stored beside the human label, with the floor applied
(``entity_comparison["shadow_floor"]``). At most
``max_concurrent`` shadow requests run at once; failures are logged and leave
the verdict empty.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from sqlalchemy import Engine
from sqlalchemy.orm import sessionmaker

from gateway.models import MisfireSample, Tenant
from gateway.proxy.decision import SemanticDecision
from gateway.proxy.upstream import Delta, Upstream, UpstreamRequest
from gateway.review.sampling_rule import (
    boost_band,
    sample_probability,
    stored_score,
)
from gateway.review.shadow import (
    DEFAULT_MIN_SIMILARITY,
    ShadowResult,
    compare_answers,
    entity_comparison,
)
from gateway.tenants import DB_UNAVAILABLE, TenantContext, utc_now
from protocol.openai import new_id
from protocol.responses import Kind, answer_text
from semantic.embedder_base import TextEmbedder
from semantic.question import normalize_question

log = logging.getLogger("cachegate.gateway.review")

#: (question, matched question, scope) -> the score scale id of the model that reads it
ScaleOf = Callable[[str, str, str], str | None]

#: Waits before writing a sample again while the database is away (hits are served
#: from memory then): about a minute of outage, then the sample is counted an error.
WRITE_RETRY_SECONDS = (5.0, 15.0, 40.0)


@dataclass(frozen=True)
class _Hit:
    tenant_id: str
    namespace_id: str  # the tenant's minted id when the hit was served
    namespace: str
    kind: Kind
    body: dict[str, Any]
    request_id: str
    entry_id: int | None
    partition_key: str
    question: str
    matched_question: str
    served_answer: str
    score: float
    threshold: float
    entity_kinds: list[str] | None
    sampling: dict[str, Any]
    verifier_score: float | None = None
    kv_block_quota: int | None = None  # the tenant's: its shadow request takes its blocks


class MisfireSampler:
    def __init__(
        self,
        db: Engine,
        upstream: Upstream,
        embedder: TextEmbedder | None,
        *,
        shadow: bool = False,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
        max_concurrent: int = 2,
        max_pending: int = 64,
        shadow_timeout: float = 120.0,
        rng: random.Random | None = None,
        registry: CollectorRegistry | None = None,
        scale_of: ScaleOf | None = None,
    ) -> None:
        #: Stored with each verifier score: the score scale of the model that gave it,
        #: ``scale_of(question, matched question, scope)`` (calibration reads only the
        #: samples of the scales in force; ``GatewayVerifier.scale_id_of``).
        self.scale_of = scale_of
        self.sessions = sessionmaker(db, expire_on_commit=False)
        self.upstream = upstream
        self.embedder = embedder
        self.shadow = shadow
        self.min_similarity = min_similarity
        self.max_pending = max_pending
        self.shadow_timeout = shadow_timeout
        self.rng = rng or random.Random()
        self._slots = asyncio.Semaphore(max_concurrent)
        self._tasks: set[asyncio.Task[None]] = set()  # samples being written
        self._shadows: set[asyncio.Task[None]] = set()  # their shadow checks (_start_shadow)
        registry = registry if registry is not None else CollectorRegistry()
        self.samples = Counter(
            "cachegate_misfire_samples",
            "Semantic hits sampled for review, by outcome (written, dropped, error)",
            ["outcome"],
            registry=registry,
        )
        self.verdicts = Counter(
            "cachegate_shadow_verdicts",
            "Shadow verifications by verdict (agree, disagree, error, skipped)",
            ["verdict"],
            registry=registry,
        )

    # ---- the request path: decide, then hand off ----------------------------------------
    def on_hit(
        self,
        ctx: TenantContext,
        kind: Kind,
        body: Mapping[str, Any],
        decision: SemanticDecision,
        request_id: str,
    ) -> bool:
        """Maybe sample this hit; returns at once (the work runs in a background task)
        and never raises into the request."""
        try:
            return self._maybe_sample(ctx, kind, body, decision, request_id)
        except Exception:
            self.samples.labels("error").inc()
            log.exception("misfire sampling failed for %s", request_id)
            return False

    def _maybe_sample(
        self,
        ctx: TenantContext,
        kind: Kind,
        body: Mapping[str, Any],
        decision: SemanticDecision,
        request_id: str,
    ) -> bool:
        result, query = decision.result, decision.query
        if result is None or query is None or result.answer is None or result.score is None:
            return False
        policy = ctx.policy
        # The threshold the lookup ran with (the retrieval threshold with the verifier on).
        threshold = policy.threshold if decision.threshold is None else decision.threshold
        band = boost_band(self.embedder, query.question)
        probability = sample_probability(policy.sample_rate, result.score, threshold, band)
        if probability <= 0.0 or self.rng.random() >= probability:
            return False
        if len(self._tasks) >= self.max_pending:
            self.samples.labels("dropped").inc()
            log.warning("misfire sample dropped: %d samples already pending", len(self._tasks))
            return False
        verifier_score = stored_score(result.verifier_score)
        hit = _Hit(
            tenant_id=ctx.tenant_id,
            namespace_id=ctx.namespace_id,
            namespace=ctx.prefix_namespace,
            kind=kind,
            body=dict(body),
            request_id=request_id[:64],
            entry_id=result.entry_id,
            partition_key=result.partition_key[:64],
            question=query.question,
            matched_question=result.cached_question or "",
            served_answer=answer_text(kind, result.answer)[0],
            score=float(result.score),
            threshold=float(threshold),
            verifier_score=verifier_score,
            kv_block_quota=policy.kv_block_quota,
            entity_kinds=policy.entity_kinds,
            sampling={
                "rate": policy.sample_rate,
                "probability": probability,
                "boosted": probability != min(1.0, policy.sample_rate),
            },
        )
        task = asyncio.get_running_loop().create_task(self._process(hit))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    # ---- the background task --------------------------------------------------------------
    async def _process(self, hit: _Hit) -> None:
        for delay in (*WRITE_RETRY_SECONDS, None):
            try:
                sample_id = await asyncio.to_thread(self._write_sample, hit)
                break
            except DB_UNAVAILABLE as exc:
                # A hit served from memory while the database is away: the sample waits
                # for it (a pending task, within max_pending; shutdown cancels it).
                if delay is None:
                    self.samples.labels("error").inc()
                    log.error("misfire sample for %s not written: %r", hit.request_id, exc)
                    return
                await asyncio.sleep(delay)
            except Exception:
                self.samples.labels("error").inc()
                log.exception("misfire sample for %s not written", hit.request_id)
                return
        if sample_id is None:
            self.samples.labels("dropped").inc()
            return
        self.samples.labels("written").inc()
        if self.shadow:
            self._start_shadow(sample_id, hit)

    def _start_shadow(self, sample_id: int, hit: _Hit) -> None:
        """Its shadow check on its own (skipped, counted, past ``max_pending``): in the
        sample's task it held a slot a whole shadow request and samples were dropped (224
        of 300 at rate 1.0 in a review: stored probabilities not the ones drawn with)."""
        if len(self._shadows) >= self.max_pending:
            self.verdicts.labels("skipped").inc()
            log.warning("shadow verification skipped: %d already pending", len(self._shadows))
            return
        task = asyncio.get_running_loop().create_task(self._verify(sample_id, hit))
        self._shadows.add(task)
        task.add_done_callback(self._shadows.discard)

    def _write_sample(self, hit: _Hit) -> int | None:
        """The new sample's id; None when the tenant that was served is gone (deleted,
        perhaps re-created under its id: its reviewers must not see the old tenant's
        questions, nor their labels move the new tenant's verifier cut)."""
        comparison = {
            "questions": entity_comparison(hit.question, hit.matched_question, hit.entity_kinds),
            "sampling": hit.sampling,
        }
        scale_id = self._scale_id(hit)  # before the transaction: it may read languages
        with self.sessions.begin() as s:
            # In the sample's own transaction: a delete committed before it is seen. The
            # row is locked (FOR SHARE on PostgreSQL; SQLite serializes writers anyway):
            # a delete that began meanwhile (it locks the row first) waits for this
            # insert and then deletes it with the tenant's other samples; unlocked, an
            # insert committed after the delete's sweep outlived it, and a tenant
            # re-created under the id saw the old tenant's question.
            tenant = s.get(Tenant, hit.tenant_id, with_for_update={"read": True})
            if tenant is None or (tenant.namespace_id or "") != hit.namespace_id:
                return None
            row = MisfireSample(
                tenant_id=hit.tenant_id,
                created_at=utc_now(),
                request_id=hit.request_id,
                entry_id=hit.entry_id,
                partition_key=hit.partition_key,
                question=hit.question,
                matched_question=hit.matched_question,
                served_answer=hit.served_answer,
                score=hit.score,
                threshold=hit.threshold,
                verifier_score=hit.verifier_score,
                verifier_model=scale_id,
                embedder_id=None if self.embedder is None else self.embedder.embedder_id,
                entity_comparison=comparison,
            )
            s.add(row)
            s.flush()
            return int(row.id)

    def _scale_id(self, hit: _Hit) -> str | None:
        """Which score scale gave the hit's verifier score (off the request path: it may
        read the pair's languages); None without a score or when it cannot be told (the
        sample then refines no cut)."""
        # an exact repeat is served at 1.0, read by no model: 3 stale ones had cut all
        repeat = normalize_question(hit.question) == normalize_question(hit.matched_question)
        if hit.verifier_score is None or self.scale_of is None or repeat:
            return None
        scope = f"review:{hit.tenant_id}"  # remembered language reads stay per tenant
        try:
            return self.scale_of(hit.question, hit.matched_question, scope)
        except Exception as exc:
            log.warning("misfire sample: score scale unknown (%s)", type(exc).__name__)
            return None

    async def _verify(self, sample_id: int, hit: _Hit) -> None:
        try:
            async with self._slots:
                async with asyncio.timeout(self.shadow_timeout):
                    fresh = await self._fresh_answer(hit)
            result = await asyncio.to_thread(
                compare_answers, self.embedder, hit.served_answer, fresh, self.min_similarity
            )
            await asyncio.to_thread(self._write_verdict, sample_id, fresh, result)
        except Exception:
            self.verdicts.labels("error").inc()
            log.exception("shadow verification of sample %s failed", sample_id)
            return
        self.verdicts.labels(result.verdict).inc()

    async def _fresh_answer(self, hit: _Hit) -> str:
        request = UpstreamRequest(
            hit.kind,
            hit.body,
            hit.namespace,
            new_id("shadow")[:64],
            tenant_id=hit.tenant_id,
            kv_block_quota=hit.kv_block_quota,
        )
        parts: list[str] = []
        events = self.upstream.stream(request)
        try:
            async for event in events:
                if isinstance(event, Delta):
                    parts.append(event.text)
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        return "".join(parts)

    def _write_verdict(self, sample_id: int, fresh: str, result: ShadowResult) -> None:
        with self.sessions.begin() as s:
            row = s.get(MisfireSample, sample_id)
            if row is None:  # deleted meanwhile (tenant deleted): nothing to annotate
                return
            row.shadow_verdict = result.verdict
            row.shadow_similarity = result.similarity
            row.shadow_answer = fresh
            row.shadow_at = utc_now()
            row.entity_comparison = {
                **(row.entity_comparison or {}),
                "answers": result.entities,
                "shadow_floor": None if result.floor is None else round(result.floor, 6),
            }

    # ---- lifecycle --------------------------------------------------------------------------
    async def drain(self, timeout: float = 60.0) -> None:
        """Wait for pending samples and their shadow checks (tests; shutdown: aclose)."""
        deadline = asyncio.get_running_loop().time() + timeout
        for tasks in (self._tasks, self._shadows):  # samples first: they start shadows
            left = deadline - asyncio.get_running_loop().time()
            if tasks and left > 0:
                await asyncio.wait(set(tasks), timeout=left)

    async def aclose(self) -> None:
        pending = self._tasks | self._shadows
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)
