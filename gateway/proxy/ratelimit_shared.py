"""Rate-limit buckets shared by every gateway replica: Redis, or PostgreSQL.

Both stores do the whole take-a-token step in one atomic round trip on the
server, with the server's clock (replicas' clocks never disagree about a
bucket): a Lua script in Redis, one ``INSERT … ON CONFLICT DO UPDATE …
RETURNING`` in PostgreSQL. Calls are bounded (``timeout`` seconds); when the
store fails the request is allowed and the failure logged once per outage,
because a rate limit is not worth refusing every tenant's traffic.

:func:`build_bucket_store` picks the store from settings: Redis when a Redis
URL is configured, else PostgreSQL when the database is PostgreSQL, else this
process (:class:`~gateway.proxy.ratelimit.LocalBuckets`, SQLite: one replica).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import create_engine, make_url, text
from sqlalchemy import exc as sa_exc

from gateway.proxy.ratelimit import BucketStore, LocalBuckets
from gateway.settings import Settings
from semantic.store_db import postgres_connect_args

log = logging.getLogger("cachegate.gateway.ratelimit")

KEY_PREFIX = "cachegate:ratelimit:"
# KEYS[1] bucket; ARGV rpm. Returns {allowed 0/1, wait in milliseconds}.
_TAKE = """
local rpm = tonumber(ARGV[1])
local rate = rpm / 60.0
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1]) or rpm
local at = tonumber(b[2]) or now
tokens = math.min(rpm, tokens + math.max(0, now - at) * rate)
local allowed = 0
local wait = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(60 / rate) + 60)
return {allowed, math.ceil(wait * 1000)}
"""

# The clock is read before the row lock is waited for: a take that waited finds a later
# time already written by the one it waited for, so it is credited nothing (greatest(0,
# ...)) and must not write its earlier time back, or the next take would be credited
# that wait again (under concurrency, far more than rpm got through).
_PG_TAKE = text(
    """
    WITH now AS (SELECT extract(epoch FROM clock_timestamp()) AS t)
    INSERT INTO rate_limit_buckets AS b (tenant_id, tokens, updated_at, allowed)
    SELECT :tenant, CAST(:rpm AS double precision) - 1, now.t, true FROM now
    ON CONFLICT (tenant_id) DO UPDATE SET
        tokens = CASE WHEN least(:rpm, b.tokens + greatest(0, EXCLUDED.updated_at - b.updated_at)
                                 * :rate) >= 1
                      THEN least(:rpm, b.tokens + greatest(0, EXCLUDED.updated_at - b.updated_at)
                                 * :rate) - 1
                      ELSE least(:rpm, b.tokens + greatest(0, EXCLUDED.updated_at - b.updated_at)
                                 * :rate) END,
        allowed = least(:rpm, b.tokens + greatest(0, EXCLUDED.updated_at - b.updated_at)
                        * :rate) >= 1,
        updated_at = greatest(b.updated_at, EXCLUDED.updated_at)
    RETURNING allowed, tokens
    """
)


class _FailOpen:
    """Allow on a store failure, logging the first failure of each outage."""

    name = "shared"

    def __init__(self) -> None:
        self._down = False

    def _failed(self, exc: Exception) -> tuple[bool, float]:
        if not self._down:
            log.error("%s rate-limit store unavailable, not limiting: %r", self.name, exc)
        self._down = True
        return True, 0.0

    def _ok(self) -> None:
        if self._down:
            log.info("%s rate-limit store is back", self.name)
        self._down = False


class RedisBuckets(_FailOpen):
    name = "redis"

    def __init__(self, url: str, timeout: float = 0.25, client: Any = None) -> None:
        super().__init__()
        import redis  # the [redis] extra; only a deployment that configures it imports it

        self.client = client or redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._script = self.client.register_script(_TAKE)
        self._errors: tuple[type[Exception], ...] = (redis.RedisError, OSError)

    def take(self, tenant_id: str, rpm: int) -> tuple[bool, float]:
        try:
            allowed, wait_ms = self._script(keys=[KEY_PREFIX + tenant_id], args=[rpm])
        except self._errors as exc:
            return self._failed(exc)
        self._ok()
        return bool(allowed), int(wait_ms) / 1000.0

    def drop(self, tenant_id: str) -> None:
        try:
            self.client.delete(KEY_PREFIX + tenant_id)
        except self._errors as exc:
            self._failed(exc)


class PostgresBuckets(_FailOpen):
    name = "postgresql"

    def __init__(self, url: str, timeout: float = 1.0) -> None:
        super().__init__()
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
        self.engine = create_engine(
            parsed.difference_update_query(["options"]),
            pool_pre_ping=True,
            pool_timeout=timeout,
            connect_args=args | {"options": options},
            hide_parameters=True,  # bound values never in an error's text (tenant ids)
        )

    def take(self, tenant_id: str, rpm: int) -> tuple[bool, float]:
        try:
            with self.engine.begin() as conn:
                allowed, tokens = conn.execute(
                    _PG_TAKE, {"tenant": tenant_id, "rpm": float(rpm), "rate": rpm / 60.0}
                ).one()
        except (sa_exc.DBAPIError, sa_exc.TimeoutError) as exc:  # down, or not migrated
            return self._failed(exc)
        self._ok()
        return bool(allowed), 0.0 if allowed else (1.0 - float(tokens)) / (rpm / 60.0)

    def drop(self, tenant_id: str) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    text("DELETE FROM rate_limit_buckets WHERE tenant_id = :t"), {"t": tenant_id}
                )
        except (sa_exc.DBAPIError, sa_exc.TimeoutError) as exc:  # down, or not migrated
            self._failed(exc)


def build_bucket_store(settings: Settings) -> BucketStore:
    """Redis if a Redis URL is set, else PostgreSQL if that is the database, else local."""
    redis_url = settings.redis_url or settings.kv_redis_url
    if redis_url:
        return RedisBuckets(redis_url)
    url = settings.resolved_database_url()
    if url.startswith("postgresql"):
        return PostgresBuckets(url)
    return LocalBuckets()
