"""The judge band on the hit path: which hits the judge is asked about, and its verdict.

A hit scored inside the tenant's ``judge_band`` is looked up pending
(``SemanticPolicy.pending_band``): not counted, its sliding expiry unmoved, until
the judge (:mod:`gateway.proxy.judge`) says both questions have the same answer;
the pipeline then confirms it (``SemanticCache.confirm_hit``). A hit the judge
refuses is a ``judge_refused`` miss that leaves no trace on the entry: counting it,
or sliding its expiry, would keep alive an answer that was not served.
"""

from __future__ import annotations

import logging

from gateway.proxy.judge import UpstreamJudge
from gateway.tenants import TenantContext
from semantic import SemanticCache, SemanticQuery
from semantic.embedder_routed import knobs_on_e5_scale, on_routed_scale
from semantic.results import LookupResult
from semantic.trace import LookupTrace

log = logging.getLogger("cachegate.gateway")


def judge_band(
    ctx: TenantContext, judge: UpstreamJudge | None, cache: SemanticCache | None
) -> tuple[float, float] | None:
    """The tenant's band on the scale of the cache's scores, or None when no judge runs."""
    band = ctx.policy.judge_band
    if band is None or judge is None:
        return None
    low, high = band.low, band.high
    if cache is not None and knobs_on_e5_scale(cache.embedder):
        # The band is written in MiniLM cosine, as every threshold a tenant sets.
        low, high = on_routed_scale(low), on_routed_scale(high)
    return low, high


def is_judged(band: tuple[float, float] | None, result: LookupResult) -> bool:
    """Whether the judge decides this hit (a dry run's included, which counts nothing)."""
    score = result.score
    return result.hit and band is not None and score is not None and band[0] <= score <= band[1]


async def judge_refuses(
    judge: UpstreamJudge,
    ctx: TenantContext,
    query: SemanticQuery,
    result: LookupResult,
    tr: LookupTrace,
) -> bool:
    """Ask the judge about a hit :func:`is_judged` holds; whether it refused it."""
    verdict = await judge.same_answer(
        query.question,
        result.cached_question or "",
        ctx.prefix_namespace,
        tenant_id=ctx.tenant_id,
        kv_block_quota=ctx.policy.kv_block_quota,
    )
    tr.step("judge", verdict.same, verdict.reason)
    if not verdict.same:
        # The reason's kind only: an unparseable answer's text (kept for explain) can
        # echo the questions of the prompt, and logs never hold user text.
        kind = verdict.reason.split(":", 1)[0]
        log.info("judge refused a hit (score %.4f): %s", result.score or 0.0, kind)
    return not verdict.same
