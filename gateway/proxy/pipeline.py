"""The request flow of DESIGN.md: semantic lookup if the policy allows → upstream → backfill.

The semantic layer is an optimisation that must never cost correctness or
availability: anything that makes a request uncacheable skips it, and a
database outage fails open to the upstream (counted, logged, shown by /ready).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from gateway.metrics import GatewayMetrics
from gateway.proxy.judge import UpstreamJudge
from gateway.tenants import TenantContext
from semantic import SemanticCache, SemanticQuery
from semantic.errors import InvalidRequestError, StoreUnavailableError
from semantic.results import LookupResult

log = logging.getLogger("cachegate.gateway")


@dataclass(frozen=True)
class CacheControl:
    """``Cache-Control: no-cache`` skips the lookup; ``no-store`` skips the backfill."""

    no_cache: bool = False
    no_store: bool = False

    @classmethod
    def parse(cls, header: str | None) -> CacheControl:
        directives = {d.strip().lower() for d in (header or "").split(",")}
        return cls(no_cache="no-cache" in directives, no_store="no-store" in directives)


@dataclass
class SemanticDecision:
    """What the semantic layer did for one request."""

    status: Literal["hit", "miss", "skipped"]
    reason: str | None  # lookup miss reason, or why the layer was skipped
    query: SemanticQuery | None = None  # set when the request is cacheable
    result: LookupResult | None = None

    @property
    def header(self) -> str:
        return self.status if self.reason is None else f"{self.status}:{self.reason}"


class Pipeline:
    def __init__(
        self,
        cache: SemanticCache | None,
        metrics: GatewayMetrics,
        judge: UpstreamJudge | None = None,
    ) -> None:
        self.cache = cache
        self.metrics = metrics
        self.judge = judge
        self.store_ok = True  # last semantic DB call succeeded (shown by /ready)

    async def lookup(
        self,
        ctx: TenantContext,
        kind: Literal["chat", "completion"],
        body: dict[str, Any],
        cc: CacheControl,
    ) -> SemanticDecision:
        policy = ctx.policy
        skip = self._skip_reason(ctx, body, cc)
        if skip is not None:
            return SemanticDecision("skipped", skip)
        assert self.cache is not None
        try:
            builder = SemanticQuery.from_chat if kind == "chat" else SemanticQuery.from_completion
            query = builder(tenant=ctx.tenant_id, body=body, namespace=ctx.semantic_namespace)
        except InvalidRequestError as exc:
            return SemanticDecision("skipped", f"uncacheable:{exc}"[:120])
        if policy.mode == "allowlist" and not policy.is_allowlisted(query.question):
            return SemanticDecision("skipped", "not_allowlisted")
        try:
            result = await asyncio.to_thread(self.cache.lookup, query, policy.semantic_policy())
        except StoreUnavailableError as exc:
            self._store_down(exc)
            return SemanticDecision("skipped", "store_unavailable")
        except InvalidRequestError as exc:
            return SemanticDecision("skipped", f"uncacheable:{exc}"[:120])
        self.store_ok = True
        if result.hit and await self._judge_refuses(ctx, query, result):
            self.metrics.semantic_miss(ctx.tenant_id, "judge_refused")
            return SemanticDecision("miss", "judge_refused", query, result)
        if result.hit:
            self.metrics.semantic_hits.labels(ctx.tenant_id).inc()
            return SemanticDecision("hit", None, query, result)
        reason = result.reason or "miss"
        self.metrics.semantic_miss(ctx.tenant_id, reason)
        return SemanticDecision("miss", reason, query, result)

    async def _judge_refuses(
        self, ctx: TenantContext, query: SemanticQuery, result: LookupResult
    ) -> bool:
        band = ctx.policy.judge_band
        if band is None or self.judge is None or result.score is None:
            return False
        if not band.low <= result.score <= band.high:
            return False
        verdict = await self.judge.same_answer(
            query.question, result.cached_question or "", ctx.prefix_namespace
        )
        if not verdict.same:
            log.info("judge refused a hit (score %.4f): %s", result.score, verdict.reason)
        return not verdict.same

    def _skip_reason(
        self, ctx: TenantContext, body: dict[str, Any], cc: CacheControl
    ) -> str | None:
        if self.cache is None:
            return "disabled"
        if not ctx.policy.semantic_enabled:
            return "policy"
        if cc.no_cache:
            return "no-cache"
        temperature = body.get("temperature")
        temperature = 1.0 if temperature is None else float(temperature)
        if temperature > ctx.policy.max_temperature:
            return "temperature"
        if (body.get("n") or 1) != 1:
            return "n"
        return None

    async def backfill(
        self,
        ctx: TenantContext,
        decision: SemanticDecision,
        cc: CacheControl,
        response: dict[str, Any],
    ) -> str:
        """Store a finished answer; returns what happened (for metrics and headers)."""
        if decision.query is None or self.cache is None:
            return "skipped:not_cacheable"
        if cc.no_store:
            return "skipped:no-store"
        if not ctx.policy.store_enabled:
            return "skipped:policy"
        embedding = decision.result.embedding if decision.result is not None else None
        try:
            result = await asyncio.to_thread(
                self.cache.store,
                decision.query,
                response,
                ctx.policy.semantic_policy(),
                embedding=embedding,
            )
        except StoreUnavailableError as exc:
            self._store_down(exc)
            outcome = "error:store_unavailable"
        except (InvalidRequestError, ValueError) as exc:
            log.warning("backfill refused: %s", exc)
            outcome = "skipped:invalid"
        else:
            self.store_ok = True
            outcome = "stored" if result.stored else f"skipped:{result.reason}"
        self.metrics.backfills.labels(ctx.tenant_id, outcome.split(":", 1)[0]).inc()
        return outcome

    async def check_store(self) -> bool:
        """Ping the semantic store now (for /ready) and remember the answer, so
        readiness follows an outage and its recovery without waiting for a request."""
        if self.cache is None:
            return True
        try:
            await asyncio.to_thread(_ping, self.cache)
        except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError) as exc:
            if self.store_ok:
                log.error("semantic store unavailable: %s", exc)
            self.store_ok = False
            return False
        self.store_ok = True
        return True

    def _store_down(self, exc: Exception) -> None:
        if self.store_ok:
            log.error("semantic store unavailable, serving without it: %s", exc)
        self.store_ok = False
        self.metrics.store_unavailable.inc()


def _ping(cache: SemanticCache) -> None:
    with cache.entries.engine.connect() as conn:
        conn.execute(text("SELECT 1"))
