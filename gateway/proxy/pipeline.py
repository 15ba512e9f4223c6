"""The request flow of DESIGN.md: semantic lookup if the policy allows → upstream → backfill.

The semantic layer is an optimisation that must never cost correctness or
availability: anything that makes a request uncacheable skips it, and a
database outage fails open to the upstream (counted, logged, shown by /ready;
gateway/proxy/store_rest.py).
``lookup(..., trace=True)`` is the same decision as a dry run with every step
recorded: the admin API's explain renders it (:mod:`gateway.admin.explain`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any, Literal

from gateway.db_rest import DbDeadlineError, within
from gateway.metrics import GatewayMetrics
from gateway.policy import TenantPolicy
from gateway.proxy.backfill_store import still_minted, store_within_bounds
from gateway.proxy.cacheable import request_temperature, unreplayable_request
from gateway.proxy.controls import CacheControl, request_policy, semantic_namespace
from gateway.proxy.decision import SemanticDecision, unforeseen
from gateway.proxy.judge import UpstreamJudge
from gateway.proxy.judged_hits import is_judged, judge_band, judge_refuses
from gateway.proxy.store_rest import StoreRest
from gateway.tenants import TenantContext
from gateway.verification import Verification
from semantic import SemanticCache, SemanticPolicy, SemanticQuery
from semantic.embedder_routed import knobs_on_e5_scale, on_routed_scale
from semantic.errors import InvalidRequestError, StoreUnavailableError, WouldBlockError
from semantic.migrate import Migrated, PartitionMigrator
from semantic.results import LookupResult
from semantic.trace import NO_TRACE, LookupTrace

log = logging.getLogger("cachegate.gateway")

#: How long a request waits for its semantic lookup, or its answer's backfill, before
#: counting the store as down (``gateway/db_rest.py``: a database that hangs fails no
#: call). Far above a lookup's own time (milliseconds, the verifier's included) and
#: above the store's read timeout (3 s) on a database that hears it.
LOOKUP_DEADLINE = 5.0
BACKFILL_DEADLINE = 5.0


#: Threads that run semantic lookups (``CACHEGATE_LOOKUP_THREADS``).
DEFAULT_LOOKUP_THREADS = 2


class Pipeline:
    def __init__(
        self,
        cache: SemanticCache | None,
        metrics: GatewayMetrics,
        judge: UpstreamJudge | None = None,
        verification: Verification | None = None,
        *,
        lookup_threads: int = DEFAULT_LOOKUP_THREADS,
        inline: bool = True,
        model_revisions: Mapping[str, str] | None = None,
        minted_id: Callable[[str], str] | None = None,
    ) -> None:
        if lookup_threads < 1:
            raise ValueError("lookup_threads must be >= 1")
        self.cache = cache
        self.metrics = metrics
        self.judge = judge
        # Lookups have a pool of their own, small: a cached lookup holds the GIL for most
        # of its ~1 ms, so threads beyond two contend rather than overlap (one thread 447
        # and 452, two 435 and 436, six 420 and 401 hits/s, interleaved; README).
        self.lookup_threads = lookup_threads
        self._lookups = ThreadPoolExecutor(lookup_threads, thread_name_prefix="cachegate-lookup")
        # Lookups that need nothing but memory are decided on the event loop (_from_memory).
        self.inline = inline
        # The pair verifier and each tenant's cut (gateway/verification.py); None: off.
        self.verification = verification
        self.rest = StoreRest(metrics)  # the store's health; the rest after a failure
        # model name -> its weights' revision, part of the partition: answers of weights
        # replaced under the same name are never served (seed 003: 缓存键要含模型版本).
        self.model_revisions = dict(model_revisions or {})
        # tenant id -> the id minted at its creation ("" once deleted): a backfill of a
        # request authenticated before its tenant was deleted is not stored (the store
        # reads it under the write lock the delete's entry drops take, so it is exact).
        self.minted_id = minted_id
        # Carries each partition over from an earlier embedder when first asked for
        # (semantic/migrate.py); None, or no earlier embedder in the store: nothing to do.
        self.migrator: PartitionMigrator | None = None

    def start_migrations(self) -> None:
        """Look for entries of earlier embedders in the store; from now on each partition
        is carried over on its first lookup. A store that cannot say is logged: its old
        entries then stay unsearched (as before this existed) until the next start."""
        if self.cache is None:
            return
        try:
            self.migrator = PartitionMigrator.for_store(self.cache, on_migrated=self._migrated)
        except StoreUnavailableError as exc:
            log.warning("could not look for entries of earlier embedders: %s", exc)

    def _migrated(self, done: Migrated) -> None:
        for outcome in ("written", "kept", "expired", "unsupported"):
            if n := getattr(done, outcome):
                self.metrics.semantic_migrated.labels(outcome).inc(n)

    @property
    def store_ok(self) -> bool:
        """The last semantic DB call succeeded (shown by /ready)."""
        return self.rest.is_ok

    async def check_store(self) -> bool:
        """Ping the semantic store now (for /ready); see :meth:`StoreRest.check`."""
        return await self.rest.check(self.cache)

    def revised(self, query: SemanticQuery) -> SemanticQuery:
        """``query`` with its model's weights revision, as lookups and backfills key it."""
        revision = self.model_revisions.get(query.model)
        return replace(query, model=f"{query.model}@{revision}") if revision else query

    async def lookup(
        self,
        ctx: TenantContext,
        kind: Literal["chat", "completion"],
        body: dict[str, Any],
        cc: CacheControl,
        *,
        trace: bool = False,
        show: int = 0,
        user: str | None = None,
    ) -> SemanticDecision:
        """The semantic layer's decision for one request.

        With ``trace`` the decision carries every step (these skip rules, then the
        cache's own, then the judge) and the lookup is a dry run: nothing is served,
        counted or moved, and a store outage raises instead of failing open, since
        there is no decision to report. The judge, when the tenant's band applies,
        is still asked: its answer decides, so a report cannot do without it.
        ``show`` is passed to :meth:`SemanticCache.lookup`. ``user`` is the end user's
        identity, which partitions the cache when the tenant's scope is ``user``.
        """
        tr = LookupTrace() if trace else NO_TRACE
        policy = ctx.policy
        try:
            skip = self._skip_reason(ctx, body, cc) or unreplayable_request(body)
        except Exception as exc:  # as below: a body no rule foresaw is forwarded uncached
            return unforeseen(exc, "reading whether it may be cached", tr)
        if skip is None and policy.semantic_scope == "user" and not user:
            skip = "no_user"  # a user-scoped tenant never shares an answer across users
        tr.step("eligible", skip is None, skip)
        if skip is not None:
            return SemanticDecision("skipped", skip, trace=tr.result)
        assert self.cache is not None
        try:
            builder = SemanticQuery.from_chat if kind == "chat" else SemanticQuery.from_completion
            namespace = semantic_namespace(ctx, cc, user)
            query = self.revised(builder(tenant=ctx.tenant_id, body=body, namespace=namespace))
        except InvalidRequestError as exc:
            tr.step("cacheable", False, str(exc))
            return SemanticDecision("skipped", f"uncacheable:{exc.reason}", trace=tr.result)
        except Exception as exc:  # a body no rule foresaw: forwarded uncached, never a 500
            return unforeseen(exc, "building the semantic query", tr)
        tr.step("cacheable", True)
        tr.asked(query.question)
        asked_at = self.cache.now()  # before the lookup, so before any model call
        if policy.mode == "allowlist":
            listed = policy.is_allowlisted(query.question)
            tr.step("allowlist", listed)
            if not listed:
                return SemanticDecision("skipped", "not_allowlisted", trace=tr.result)
        if cc.no_cache:
            # No lookup, but the fresh answer is stored (as HTTP and LiteLLM do), replacing
            # a stale entry; no-store is the backfill's switch (never stored before s43).
            tr.step("no_cache", False, "no-cache: the lookup is skipped")
            return SemanticDecision(
                "skipped", "no-cache", query=query, asked_at=asked_at, trace=tr.result
            )
        sem = request_policy(ctx, cc, lookup=True)
        if self.verification is None and knobs_on_e5_scale(self.cache.embedder):
            # The tenant's threshold is a MiniLM cosine: on the routed scale the same
            # English questions pass, on e5's Chinese ones as e5 reads them
            # (semantic/embedder_routed.py).
            sem = replace(sem, threshold=on_routed_scale(sem.threshold))
        if self.verification is not None:
            try:
                sem, cut = await self.verification.apply(ctx.tenant_id, policy, sem)
            except Exception as exc:  # no cut known to be safe: nothing is served
                return unforeseen(exc, "choosing the verifier cut", tr)
            tr.step(
                "verifier_cut",
                True,
                f"cut {cut.cut:.4f} for target misfire rate {cut.target} ({cut.source}"
                + (", kept: labels unreadable)" if cut.is_kept else ")"),
            )
        band = judge_band(ctx, self.judge, self.cache)
        if band is not None and not trace:  # counted once the judge agrees (judged_hits.py)
            sem = replace(sem, pending_band=band)
        from_memory = False
        try:
            result = self._from_memory(query, sem) if self.inline and not trace else None
            from_memory = result is not None
            if result is None:
                if not trace:
                    if self.rest.is_resting():  # not queued behind threads a hang holds
                        raise StoreUnavailableError("the semantic store is resting")
                    self.metrics.semantic_lookups.labels("thread").inc()
                lookup = partial(self._lookup, query, sem, trace=trace, show=show)
                # as asyncio.to_thread does: the caller's context (trace spans) goes along
                future = asyncio.get_running_loop().run_in_executor(
                    self._lookups, contextvars.copy_context().run, lookup
                )
                # A database that hangs never fails the call: past the deadline the
                # lookup is given up (its thread runs on) and the layer rests.
                result = await (future if trace else asyncio.wait_for(future, LOOKUP_DEADLINE))
        except (StoreUnavailableError, TimeoutError) as exc:
            if trace:
                raise
            return await self._store_failed(exc)
        except InvalidRequestError as exc:
            tr.step("cacheable", False, str(exc))
            return SemanticDecision("skipped", f"uncacheable:{exc.reason}", trace=tr.result)
        except Exception as exc:  # e.g. keying a part of the body no rule foresaw
            return unforeseen(exc, "the semantic lookup", tr)
        if result.trace is not None:
            tr.follow(result.trace)
        if self.migrator is not None and self.migrator.is_active and not trace:
            # once per partition and process; an empty partition is decided from memory,
            # so this is asked whichever way the lookup went
            self.migrator.touch(query, result.partition_key, self._still_wanted(ctx))
        count = not trace  # a dry run counts nothing
        if count and not from_memory:  # memory says nothing of the store: it may rest on
            self.rest.succeeded()
        if is_judged(band, result):
            assert self.judge is not None
            if await judge_refuses(self.judge, ctx, query, result, tr):
                if count:
                    self.metrics.semantic_miss(ctx.tenant_id, "judge_refused")
                return SemanticDecision(
                    "miss", "judge_refused", query, result, tr.result, sem.threshold, asked_at
                )
        if result.is_pending:
            try:
                result = await self._confirmed(query, result, sem)
            except (StoreUnavailableError, TimeoutError) as exc:  # as a lookup's failure
                return await self._store_failed(exc)
        if result.hit:
            if count:
                self.metrics.semantic_hits.labels(ctx.tenant_id).inc()
            return SemanticDecision("hit", None, query, result, tr.result, sem.threshold, asked_at)
        reason = result.reason or "miss"
        if count:
            self.metrics.semantic_miss(ctx.tenant_id, reason, result.verifier_unread)
        return SemanticDecision("miss", reason, query, result, tr.result, asked_at=asked_at)

    def threshold_in_force(self, policy: TenantPolicy) -> tuple[float, float | None]:
        """(the similarity threshold a lookup of this tenant applies, on the scale of its
        scores; the knob that sets it, None when the embedder's default does): with the
        verifier on, the retrieval threshold; else the tenant's ``threshold``; either on
        e5's scale under ``auto`` and ``e5``, where the knobs are MiniLM cosines."""
        if self.verification is not None:
            return self.verification.retrieval_threshold(policy), policy.retrieval_threshold
        mapped = self.cache is not None and knobs_on_e5_scale(self.cache.embedder)
        given = policy.threshold
        return (on_routed_scale(given) if mapped else given), given

    def _from_memory(self, query: SemanticQuery, sem: SemanticPolicy) -> LookupResult | None:
        """The lookup decided on the event loop when it needs nothing but memory (a
        repeated question: its vector, rows and verdicts kept), else None. The thread hop
        and the GIL hand-offs it brings cost ~0.6 ms a hit under load (README "Speed"),
        a third of a cached hit; anything that would wait goes to the lookup threads."""
        assert self.cache is not None
        try:
            result = self.cache.lookup(query, sem, local_only=True)
        except WouldBlockError:
            return None
        self.metrics.semantic_lookups.labels("memory").inc()
        return result

    async def _store_failed(self, exc: StoreUnavailableError | TimeoutError) -> SemanticDecision:
        """The request goes on to the model (a timeout: the store hangs, or was slow)."""
        if isinstance(exc, TimeoutError):
            hung = await self.rest.hung_after_deadline(self.cache, "lookup")
            return SemanticDecision("skipped", "store_unavailable" if hung else "lookup_timeout")
        self.rest.failed(exc)
        return SemanticDecision("skipped", "store_unavailable")

    async def _confirmed(
        self, query: SemanticQuery, pending: LookupResult, sem: SemanticPolicy
    ) -> LookupResult:
        """A pending hit the judge accepted, counted (a miss if its entry went meanwhile)."""
        assert self.cache is not None
        try:
            return self.cache.confirm_hit(query, pending, sem, local_only=True)
        except WouldBlockError:
            self.rest.raise_if_resting()
        confirm = partial(self.cache.confirm_hit, query, pending, sem)
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._lookups, contextvars.copy_context().run, confirm)
        return await asyncio.wait_for(future, LOOKUP_DEADLINE)

    def _skip_reason(
        self, ctx: TenantContext, body: dict[str, Any], cc: CacheControl
    ) -> str | None:
        if self.cache is None:
            return "disabled"
        if not ctx.policy.semantic_enabled:
            return "policy"
        if request_temperature(body.get("temperature")) > ctx.policy.max_temperature:
            return "temperature"
        return None

    async def backfill(
        self,
        ctx: TenantContext,
        decision: SemanticDecision,
        cc: CacheControl,
        response: dict[str, Any],
        usage_known: bool = True,
    ) -> str:
        """Store a finished answer; returns what happened (for metrics and headers).

        An answer whose usage the upstream did not report is not stored: its hits would
        report 0 tokens to the client and count 0 saved (``skipped:no_usage``)."""
        if decision.query is None or self.cache is None:
            return "skipped:not_cacheable"
        if cc.no_store:
            return "skipped:no-store"
        if not ctx.policy.store_enabled:
            return "skipped:policy"
        if not usage_known:
            self.metrics.backfills.labels(ctx.tenant_id, "skipped").inc()
            return "skipped:no_usage"
        # The lookup's vector and partition key: the question is neither embedded
        # nor its partition hashed a second time for the same request.
        looked = decision.result
        cache = self.cache
        key = looked.partition_key if looked is not None else None
        sem = request_policy(ctx, cc)
        try:
            self.rest.raise_if_resting()
            result = await within(
                BACKFILL_DEADLINE,
                store_within_bounds,
                cache,
                ctx,
                decision.query,
                key or cache.partition_key(decision.query),
                response,
                sem,
                looked.embedding if looked is not None else None,
                self.minted_id,
                decision.asked_at,
            )
        except StoreUnavailableError as exc:
            self.rest.failed(exc)
            outcome = "error:store_unavailable"
        except DbDeadlineError:  # the write runs on (an upsert) or fails alone
            hung = await self.rest.hung_after_deadline(self.cache, "backfill")
            outcome = "error:store_unavailable" if hung else "error:timeout"
        except (InvalidRequestError, ValueError) as exc:
            log.warning("backfill refused: %s", exc)
            outcome = "skipped:invalid"
        except Exception:  # the model has answered: a failed backfill must not cost the answer
            log.exception("backfill failed")
            outcome = "error:internal"
        else:
            self.rest.succeeded()
            outcome = "stored" if result.stored else f"skipped:{result.reason}"
        self.metrics.backfills.labels(ctx.tenant_id, outcome.split(":", 1)[0]).inc()
        return outcome

    def _lookup(
        self, query: SemanticQuery, sem: SemanticPolicy, *, trace: bool, show: int
    ) -> LookupResult:
        # Checked in the lookup thread, not before queueing: lookups queued behind one
        # stuck on a hung database then fail at once instead of each waiting in turn.
        if not trace:
            self.rest.raise_if_resting()
        assert self.cache is not None
        return self.cache.lookup(query, sem, trace=trace, show=show)

    def _still_wanted(self, ctx: TenantContext) -> Callable[[], bool] | None:
        minted_id = self.minted_id
        return None if minted_id is None else partial(still_minted, minted_id, ctx)

    def close(self) -> None:
        """Let running lookups finish; stop the lookup threads and migrations."""
        self._lookups.shutdown(wait=True)
        if self.migrator is not None:
            self.migrator.close()
