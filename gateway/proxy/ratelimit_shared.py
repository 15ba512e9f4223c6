"""Rate-limit buckets shared by every gateway replica: Redis, or PostgreSQL.

Both stores do the whole take-a-token step in one atomic round trip on the
server, with the server's clock (replicas' clocks never disagree about a
bucket): a Lua script in Redis, one ``INSERT … ON CONFLICT DO UPDATE …
RETURNING`` in PostgreSQL. Calls are bounded (``timeout`` seconds); when the
store fails the request is allowed and the failure logged once per outage,
because a rate limit is not worth refusing every tenant's traffic.

A circuit breaker keeps a store that hangs from slowing every limited request by
its timeout (on the thread pool the routes share with authentication): after a
failure the store is not asked for ``cooldown`` seconds (requests are let through
at once), then one request at a time probes it (the others are let through
meanwhile) until one succeeds. ``failures``, ``bypassed`` and ``is_open`` are
exported as ``cachegate_ratelimit_store_*`` (:meth:`RateLimiter.bind_metrics
<gateway.proxy.ratelimit.RateLimiter.bind_metrics>`).

:func:`build_bucket_store` picks the store from settings: Redis when a Redis
URL is configured, else PostgreSQL when the database is PostgreSQL, else this
process (:class:`~gateway.proxy.ratelimit.LocalBuckets`, SQLite: one replica).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import create_engine, make_url, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from gateway.proxy.ratelimit import DEBT_MINUTES, BucketStore, LocalBuckets, Taken
from gateway.settings import Settings
from semantic.store_db import postgres_connect_args

log = logging.getLogger("cachegate.gateway.ratelimit")

KEY_PREFIX = "cachegate:ratelimit:"
# KEYS[1] bucket; ARGV rpm, cost, need, the debt's depth in minutes. Returns {allowed
# 0/1, wait in milliseconds, tokens left in thousandths} (Redis turns a Lua number into
# an integer).
_TAKE = """
local rpm = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local need = tonumber(ARGV[3])
local rate = rpm / 60.0
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local floor = -tonumber(ARGV[4]) * rpm
local tokens = tonumber(b[1]) or rpm
local at = tonumber(b[2]) or now
tokens = math.min(rpm, math.max(floor, tokens) + math.max(0, now - at) * rate)
local allowed = 0
local wait = 0
if tokens >= need then tokens = math.max(floor, tokens - cost); allowed = 1
else wait = (need - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil((rpm - tokens) / rate) + 60)
return {allowed, math.ceil(wait * 1000), math.floor(tokens * 1000)}
"""

# The clock is read before the row lock is waited for: a take that waited finds a later
# time already written by the one it waited for, so it is credited nothing (greatest(0,
# ...)) and must not write its earlier time back, or the next take would be credited
# that wait again (under concurrency, far more than rpm got through).
_PG_TAKE = text(
    """
    WITH now AS (SELECT extract(epoch FROM clock_timestamp()) AS t)
    INSERT INTO rate_limit_buckets AS b (tenant_id, tokens, updated_at, allowed)
    SELECT :tenant, greatest(:floor, CAST(:rpm AS double precision) - :cost), now.t, true
    FROM now
    ON CONFLICT (tenant_id) DO UPDATE SET
        tokens = CASE WHEN least(:rpm, greatest(:floor, b.tokens)
                                 + greatest(0, EXCLUDED.updated_at - b.updated_at) * :rate)
                           >= :need
                      THEN greatest(:floor, least(:rpm, greatest(:floor, b.tokens)
                                 + greatest(0, EXCLUDED.updated_at - b.updated_at) * :rate)
                                 - :cost)
                      ELSE least(:rpm, greatest(:floor, b.tokens)
                                 + greatest(0, EXCLUDED.updated_at - b.updated_at) * :rate) END,
        allowed = least(:rpm, greatest(:floor, b.tokens)
                        + greatest(0, EXCLUDED.updated_at - b.updated_at) * :rate) >= :need,
        updated_at = greatest(b.updated_at, EXCLUDED.updated_at)
    RETURNING allowed, tokens
    """
)


#: Seconds a failed store is left alone before one request probes it again.
COOLDOWN_S = 5.0

# A bucket refills from empty to full within 60 s (rpm tokens at rpm/60 a second), from
# its lowest (a model-token bucket's debt, DEBT_MINUTES of its limit: ratelimit.refill)
# within DEBT_MINUTES + 1 minutes, and
# a full bucket is what a missing row means (the take inserts one). So rows untouched
# for longer are dropped now and then (deleted tenants' that a failed drop left, limits
# removed, keys of an earlier scheme), and the table holds the tenants active in the
# last minutes, not every tenant ever limited. Redis keys expire by themselves.
# In batches: one statement stays far under the statement timeout however many rows
# have piled up (the first purge after an upgrade meets every tenant's old-key row),
# and a full batch brings the next purge forward.
_PG_PURGE = text(
    "DELETE FROM rate_limit_buckets WHERE ctid IN ("
    "SELECT ctid FROM rate_limit_buckets "
    "WHERE updated_at < extract(epoch FROM clock_timestamp()) - :age LIMIT :batch)"
)
PURGE_AGE_S = 60.0 * (DEBT_MINUTES + 2)
PURGE_EVERY_S = 60.0
PURGE_BATCH = 1000


class FailOpen:
    """Allow on a store failure, logging the first failure of each outage; a circuit
    breaker in front of the store (see the module)."""

    name = "shared"
    #: What the log says of the store, and of what is done while it is away.
    role = "rate-limit"
    degraded = "not limiting"
    _errors: tuple[type[Exception], ...] = ()

    def __init__(
        self, cooldown: float = COOLDOWN_S, now: Callable[[], float] = time.monotonic
    ) -> None:
        self.cooldown = cooldown
        self._now = now
        self._lock = threading.Lock()
        self._open_until: float | None = None  # None: closed (the store is asked)
        self._probing = False
        self.failures = 0  # store calls that failed
        self.bypassed = 0  # calls let through without an answer from the store

    @property
    def is_open(self) -> bool:
        """The store failed and no probe has succeeded since: limits are not enforced."""
        with self._lock:
            return self._open_until is not None

    def would_bypass(self) -> bool:
        """Whether a call now would be let through without asking the store (the
        breaker open, its probe not due or out), counted as such: the request path asks
        this before it takes a thread, so a store that hangs, or a busy pool, costs the
        calls behind the probe nothing."""
        with self._lock:
            until = self._open_until
            if until is None or not (self._probing or self._now() < until):
                return False
            self.bypassed += 1
            return True

    def _guarded(self, call: Callable[[], Taken]) -> Taken:
        """``call()`` unless the breaker is open (then allowed at once); a failure opens it."""
        with self._lock:
            until = self._open_until
            probe = until is not None  # open: this call is the one probe, or let through
            if until is not None:
                if self._probing or self._now() < until:
                    self.bypassed += 1
                    return Taken(True, 0.0)
                self._probing = True
        try:
            result = call()
        except self._errors as exc:
            return self._failed(exc)
        finally:
            if probe:
                with self._lock:
                    self._probing = False
        self._ok()
        return result

    def hung(self, exc: Exception) -> None:
        """A call the request path stopped waiting for (a store that hangs fails no
        call: gateway/db_rest.py): opens the breaker as a failure does, so the calls
        behind it are let through at once instead of each holding a thread."""
        self._failed(exc)

    def _failed(self, exc: Exception) -> Taken:
        with self._lock:
            first = self._open_until is None
            self._open_until = self._now() + self.cooldown
            self.failures += 1
            self.bypassed += 1
        if first:
            log.error(
                "%s %s store unavailable, %s (retried every %.0f s): %r",
                self.name,
                self.role,
                self.degraded,
                self.cooldown,
                exc,
            )
        return Taken(True, 0.0)

    def _ok(self) -> None:
        with self._lock:
            was_open, self._open_until = self._open_until is not None, None
        if was_open:
            log.info("%s %s store is back", self.name, self.role)


class RedisBuckets(FailOpen):
    name = "redis"

    def __init__(
        self, url: str, timeout: float = 0.25, client: Any = None, cooldown: float = COOLDOWN_S
    ) -> None:
        super().__init__(cooldown)
        import redis  # the [redis] extra; only a deployment that configures it imports it

        self.client = client or redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._script = self.client.register_script(_TAKE)
        self._errors = (redis.RedisError, OSError)

    def take(self, tenant_id: str, rpm: int, cost: float = 1.0, need: float = 1.0) -> Taken:
        return self._guarded(lambda: self._take(tenant_id, rpm, cost, need))

    def _take(self, tenant_id: str, rpm: int, cost: float, need: float) -> Taken:
        args: list[str | int] = [rpm, repr(float(cost)), repr(float(need)), DEBT_MINUTES]
        allowed, wait_ms, tokens = self._script(keys=[KEY_PREFIX + tenant_id], args=args)
        return Taken(bool(allowed), int(wait_ms) / 1000.0, int(tokens) / 1000.0)

    def drop(self, tenant_id: str) -> None:
        self._guarded(lambda: self._drop(tenant_id))

    def _drop(self, tenant_id: str) -> Taken:
        self.client.delete(KEY_PREFIX + tenant_id)
        return Taken(True, 0.0)


def store_engine(url: str, timeout: float) -> Engine:
    """A PostgreSQL engine for a shared store on the request path: every statement,
    lock waits included, bounded by ``timeout``."""
    parsed = make_url(url)
    # Keep the URL's own options (a search_path, say) beside the statement timeout,
    # which comes last so that it wins: it bounds the request path (lock waits too).
    given = parsed.query.get("options")
    own = [given] if isinstance(given, str) else list(given or ())
    options = " ".join([*own, f"-c statement_timeout={int(timeout * 1000)}"])
    # The store's TCP keepalives and tcp_user_timeout: the statement timeout is the
    # server's, so without them a host that stops answering holds each call (and
    # the pool's pre-ping) for the operating system's TCP timeout, minutes.
    args = postgres_connect_args(parsed, connect_timeout=timeout, lock_timeout_ms=None)
    return create_engine(
        parsed.difference_update_query(["options"]),
        # Whatever the server's default: the stores' statements are written for READ
        # COMMITTED (a statement after a lock wait sees what committed meanwhile).
        isolation_level="READ COMMITTED",
        pool_pre_ping=True,
        pool_timeout=timeout,
        connect_args=args | {"options": options},
        hide_parameters=True,  # bound values never in an error's text (tenant ids)
    )


class PostgresBuckets(FailOpen):
    name = "postgresql"

    def __init__(self, url: str, timeout: float = 1.0, cooldown: float = COOLDOWN_S) -> None:
        super().__init__(cooldown)
        # Down, or not migrated.
        self._errors = (sa_exc.DBAPIError, sa_exc.TimeoutError)
        self.engine = store_engine(url, timeout)
        self._next_purge = 0.0  # monotonic time of the next purge of stale rows

    def take(self, tenant_id: str, rpm: int, cost: float = 1.0, need: float = 1.0) -> Taken:
        return self._guarded(lambda: self._take(tenant_id, rpm, cost, need))

    def _take(self, tenant_id: str, rpm: int, cost: float, need: float) -> Taken:
        values = {"tenant": tenant_id, "rpm": float(rpm), "rate": rpm / 60.0}
        values["floor"] = -float(DEBT_MINUTES * rpm)
        with self.engine.begin() as conn:
            allowed, tokens = conn.execute(
                _PG_TAKE, values | {"cost": float(cost), "need": float(need)}
            ).one()
        self._purge_now_and_then()
        wait = 0.0 if allowed else (need - float(tokens)) / (rpm / 60.0)
        return Taken(bool(allowed), wait, float(tokens))

    def _purge_now_and_then(self) -> None:
        """Drop rows that stand for full buckets (see ``_PG_PURGE``), at most once a
        ``PURGE_EVERY_S`` per store, in a transaction of its own after the take (a take
        that meets a row being purged waits and then inserts a full one, which it is)."""
        now = time.monotonic()
        with self._lock:
            if now < self._next_purge:
                return
            self._next_purge = now + PURGE_EVERY_S
        try:
            with self.engine.begin() as conn:
                gone = conn.execute(_PG_PURGE, {"age": PURGE_AGE_S, "batch": PURGE_BATCH})
                full = gone.rowcount >= PURGE_BATCH
        except self._errors as exc:  # the take succeeded: a purge is only housekeeping
            log.warning("purging stale rate-limit buckets failed: %r", exc)
            return
        if full:  # more are waiting: the next take purges again
            with self._lock:
                self._next_purge = now

    def drop(self, tenant_id: str) -> None:
        self._guarded(lambda: self._drop(tenant_id))

    def _drop(self, tenant_id: str) -> Taken:
        with self.engine.begin() as conn:
            conn.execute(
                text("DELETE FROM rate_limit_buckets WHERE tenant_id = :t"), {"t": tenant_id}
            )
        return Taken(True, 0.0)


def build_bucket_store(settings: Settings) -> BucketStore:
    """Redis if a Redis URL is set, else PostgreSQL if that is the database, else local."""
    redis_url = settings.redis_url or settings.kv_redis_url
    if redis_url:
        return RedisBuckets(redis_url)
    url = settings.resolved_database_url()
    if url.startswith("postgresql"):
        return PostgresBuckets(url)
    return LocalBuckets()
