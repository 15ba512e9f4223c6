"""Who is asking, and whether they may: the tenant behind a request's key and its
rate limit, each waited for within a deadline.

A database that hangs instead of refusing fails no call (``gateway/db_rest.py``), so
the key store and a shared rate-limit bucket are asked within deadlines; past them
the key is answered from memory (the store then rests) and the limit is not enforced
(its breaker opens), as when either is down.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from fastapi import Request
from fastapi.responses import Response

from gateway.db_rest import DbDeadlineError, within
from gateway.errors import RateLimitError
from gateway.proxy.concurrency import Claim, TenantConcurrency, keep_slot
from gateway.proxy.ratelimit import REQUEST_LIMIT_HEADERS, RateLimiter
from gateway.proxy.token_limit import TOKEN_LIMIT_HEADERS, check_tokens, token_standing
from gateway.state import GatewayState
from gateway.tenants import TenantContext

log = logging.getLogger("cachegate.gateway")


def state(request: Request) -> GatewayState:
    gw: GatewayState = request.app.state.gateway
    return gw


def bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization") or ""
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


#: How long a request waits for the key store (a few primary-key reads, bounded by
#: AUTH_STATEMENT_TIMEOUT_MS on a database that hears it); past it, one that hangs is
#: treated as down: the key is answered from memory and the store rests
#: (gateway/db_rest.py).
AUTH_DEADLINE_SECONDS = 3.5


#: How long a request waits for its shared rate-limit bucket (the store's own calls are
#: bounded at 1 s where the server or the socket can tell).
RATE_LIMIT_DEADLINE_SECONDS = 2.0
#: The shared rate-limit store's calls: threads of their own (see rate_limit()); a store
#: that hangs holds at most the probe's, the breaker letting the rest through.
RATE_LIMIT_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="cachegate-ratelimit")
#: The shared in-flight slots' takes, on threads of their own for the same reason.
SLOT_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="cachegate-slots")


async def authenticate(request: Request) -> TenantContext:
    ctx = await _authenticate(request)
    state(request).metrics.saw(ctx.tenant_id, ctx.namespace_id)  # whose series these are
    return ctx


async def _authenticate(request: Request) -> TenantContext:
    tenants, key = state(request).tenants, bearer(request)
    ctx = tenants.cached(key)
    if ctx is not None:
        return ctx
    if tenants.rest.is_resting():  # no thread: hung ones must not fill the pool
        return tenants.from_memory(key)
    try:
        return await within(AUTH_DEADLINE_SECONDS, tenants.authenticate, key)
    except DbDeadlineError:
        if tenants.rest.is_ok:
            log.error("the key store did not answer within %g s", AUTH_DEADLINE_SECONDS)
        tenants.rest.failed()
        return tenants.from_memory(key)


async def hold_slot(request: Request, ctx: TenantContext) -> None:
    """Take one of the tenant's in-flight slots (429 ``too_many_concurrent_requests``
    when its ``max_concurrent_requests`` are all held: ``gateway/proxy/concurrency.py``),
    before its rate-limit token, so a refused request spends none. The 429 carries the
    tenant's x-ratelimit-* headers all the same, read without taking from the buckets
    (before session 48 it had none, where every other 429 of the tenant has them)."""
    slots: TenantConcurrency | None = getattr(request.app.state, "concurrency", None)
    if slots is None:
        return
    try:
        keep_slot(request.scope.setdefault("state", {}), await _take_slot(slots, ctx))
    except RateLimitError as err:
        state(request).metrics.concurrency_refused.labels(ctx.tenant_id).inc()
        err.headers = await _standing(request.app.state.rate_limiter, ctx) | err.headers
        raise


async def _take_slot(slots: TenantConcurrency, ctx: TenantContext) -> Callable[[], None] | None:
    """The slot's release: through the shared store, off the event loop, within the rate
    limit's deadline (past it the store is taken as hung and this replica counts), or
    counted here at once when there is no store or it rests."""
    if not slots.asks_store(ctx):
        return slots.acquire(ctx)
    claim = Claim()
    try:
        return await within(
            RATE_LIMIT_DEADLINE_SECONDS, slots.acquire_shared, ctx, claim, pool=SLOT_POOL
        )
    except DbDeadlineError as exc:
        claim.abandon()  # a lease the hung call takes later is given back when it lands
        # A take still queued for a thread says nothing of the store (a burst): only one
        # the store kept waiting opens the breaker.
        if claim.started and slots.shared is not None:
            slots.shared.hung(exc)
        return slots.acquire(ctx)
    except BaseException:  # cancelled (the client left) or refused: hold nothing
        claim.abandon()
        raise


async def _standing(limiter: RateLimiter, ctx: TenantContext) -> dict[str, str]:
    """Where the tenant's buckets stand, nothing taken; none for a tenant without limits
    or while the store rests, hangs or fails (the 429 goes out without them)."""
    policy = ctx.policy
    if policy.rate_limit_rpm is None and policy.rate_limit_tpm is None:
        return {}
    if limiter.would_bypass():
        return {}
    try:
        return await within(
            RATE_LIMIT_DEADLINE_SECONDS, _read_both, limiter, ctx, pool=RATE_LIMIT_POOL
        )
    except DbDeadlineError as exc:  # a store that hangs, as rate_limit() reads it
        limiter.store_hung(exc)
    except Exception as exc:  # the refusal stands without them
        log.warning("rate-limit headers of a 429 not read (%s)", type(exc).__name__)
    return {}


def _read_both(limiter: RateLimiter, ctx: TenantContext) -> dict[str, str]:
    return limiter.standing(ctx) | token_standing(limiter, ctx)


async def rate_limit(request: Request, ctx: TenantContext) -> None:
    """Take the tenant's token (429 + Retry-After when none is left: ratelimit.py), and
    check its bucket of model tokens (token_limit.py). The buckets' x-ratelimit-*
    headers go on whatever answers the request, an error too (``with_limit_headers``,
    ``gateway/error_handlers.py``)."""
    limiter = request.app.state.rate_limiter
    policy = ctx.policy
    if policy.rate_limit_rpm is None and policy.rate_limit_tpm is None:
        headers = limiter.check(ctx)  # nothing to count: no store is asked
    elif limiter.would_bypass():  # the store is resting: no thread, not enforced
        headers = {}
    else:  # a shared bucket is a Redis or PostgreSQL round trip: off the event loop
        try:
            # Its own threads: on the database pool, a pool busy with auth, backfills or
            # /ready made every check wait out its deadline, read as a store that hangs,
            # and the limits were off while the store answered (a review, session 41).
            headers = await within(
                RATE_LIMIT_DEADLINE_SECONDS, _check_both, limiter, ctx, pool=RATE_LIMIT_POOL
            )
        except DbDeadlineError as exc:  # a store that hangs: not enforced, as when down
            limiter.store_hung(exc)
            headers = {}
    request.state.rate_limit_headers = headers
    request.state.rate_limited = policy.rate_limit_rpm is not None
    request.state.token_limited = policy.rate_limit_tpm is not None


def _check_both(limiter: RateLimiter, ctx: TenantContext) -> dict[str, str]:
    """The token bucket's admission (it takes nothing), then the request bucket's token:
    a tenant in token debt that retries does not drain its requests too. A 429 of
    either bucket carries both buckets' headers (the token bucket's 429 read the request
    bucket's without taking a token; before session 44 it carried only its own)."""
    try:
        headers = check_tokens(limiter, ctx)
    except RateLimitError as err:
        err.headers = limiter.standing(ctx) | err.headers
        raise
    try:
        return headers | limiter.check(ctx)
    except RateLimitError as err:
        err.headers = headers | err.headers
        raise


def with_limit_headers(request: Request, response: Response) -> Response:
    """The tenant's own rate-limit headers on its answer, in place of an upstream's of
    those names, which count the gateway's account (every tenant's requests): those go
    even when the tenant's are not known (its store down), never misread as its own."""
    for name in shadowed_limit_headers(request):
        del response.headers[name]
    for name, value in getattr(request.state, "rate_limit_headers", {}).items():
        response.headers[name] = value
    return response


def shadowed_limit_headers(request: Request) -> set[str]:
    """The limit headers (lower case) an upstream's answer may not carry to this
    request's client: those of each bucket the tenant's policy limits."""
    names: set[str] = set()
    if getattr(request.state, "rate_limited", False):
        names.update(REQUEST_LIMIT_HEADERS)
    if getattr(request.state, "token_limited", False):
        names.update(TOKEN_LIMIT_HEADERS)
    return names
