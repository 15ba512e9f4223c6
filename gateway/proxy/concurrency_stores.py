"""The shared in-flight slot stores (``gateway/proxy/concurrency_shared.py`` says what
a lease is): Redis, a sorted set per tenant whose scores are the leases' expiry times,
each step one Lua script with the server's clock; PostgreSQL, ``concurrency_leases``
(migration 0017), a take one transaction under the tenant's advisory lock.

:func:`build_slot_store` picks the store as the rate limiter does: Redis when a Redis
URL is set, else PostgreSQL when that is the database, else none (SQLite: one replica,
counted in memory).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from gateway.proxy.concurrency_shared import Pair, SlotStore
from gateway.proxy.ratelimit import Taken
from gateway.proxy.ratelimit_shared import store_engine
from gateway.settings import Settings

log = logging.getLogger("cachegate.gateway.concurrency")

KEY_PREFIX = "cachegate:inflight:"

# KEYS[1] the tenant's set; ARGV cap, lease milliseconds, lease id. Returns {taken 0/1,
# leases held after the call}. Expired members go first: a dead replica's leases.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[1]) then return {0, held} end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], 2 * tonumber(ARGV[2]))
return {1, held + 1}
"""
# KEYS[1] the tenant's set; ARGV lease milliseconds, then the leases this replica holds.
# XX: a lease released (or expired) meanwhile is not brought back.
_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ms = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + ms, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], 2 * ms)
return 1
"""

_NOW = "extract(epoch FROM clock_timestamp())"
# Serialises takes of one tenant's slots across replicas for the transaction (a count
# then an insert would otherwise let two takes both see cap − 1). Correct under READ
# COMMITTED only, where each statement after the lock sees what committed before it was
# granted: the store's engine pins that level (ratelimit_shared.store_engine).
_PG_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 49))")
_PG_EXPIRE = text(f"DELETE FROM concurrency_leases WHERE slot_key = :key AND expires_at < {_NOW}")
# The count before, and whether the lease went in: one round trip.
_PG_TAKE = text(
    "WITH held AS (SELECT count(*) AS n FROM concurrency_leases "
    "WHERE slot_key = CAST(:key AS varchar)), "
    "taken AS (INSERT INTO concurrency_leases (slot_key, lease_id, expires_at) "
    f"SELECT CAST(:key AS varchar), CAST(:lease AS varchar), {_NOW} + :ttl FROM held "
    "WHERE held.n < :cap RETURNING 1) "
    "SELECT held.n, (SELECT count(*) FROM taken) FROM held"
)
_PAIRS = "(SELECT * FROM unnest(CAST(:keys AS varchar[]), CAST(:leases AS varchar[])))"
_PG_RENEW = text(
    f"UPDATE concurrency_leases SET expires_at = {_NOW} + :ttl "
    f"WHERE (slot_key, lease_id) IN {_PAIRS}"
)
_PG_RELEASE = text(f"DELETE FROM concurrency_leases WHERE (slot_key, lease_id) IN {_PAIRS}")
# Leases of tenants nobody has asked for since they expired (a replica that died, a
# tenant gone quiet), in batches, now and then: each take drops its own tenant's.
_PG_PURGE = text(
    "DELETE FROM concurrency_leases WHERE ctid IN (SELECT ctid FROM concurrency_leases "
    f"WHERE expires_at < {_NOW} - 60 LIMIT 1000)"
)
PURGE_EVERY_S = 60.0


def _by_key(pairs: list[Pair]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for key, lease in pairs:
        grouped.setdefault(key, []).append(lease)
    return grouped


class RedisSlots(SlotStore):
    name = "redis"

    def __init__(self, url: str, timeout: float = 0.25, client: Any = None, **kw: Any) -> None:
        super().__init__(**kw)
        import redis  # the [redis] extra; only a deployment that configures it imports it

        self.client = client or redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._errors = (redis.RedisError, OSError)
        self._take = self.client.register_script(_ACQUIRE)
        self._extend = self.client.register_script(_RENEW)

    def _ms(self) -> int:
        return max(1, int(self.lease_s * 1000))

    def _acquire(self, key: str, cap: int, lease: str) -> Taken:
        args: list[str | int] = [cap, self._ms(), lease]
        taken, held = self._take(keys=[KEY_PREFIX + key], args=args, client=self.client)
        return Taken(bool(taken), 0.0 if taken else 1.0, float(held))

    def _release(self, pairs: list[Pair]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for key, leases in _by_key(pairs).items():
            pipe.zrem(KEY_PREFIX + key, *leases)
        pipe.execute()

    def _renew(self, pairs: list[Pair]) -> Taken:
        pipe = self.client.pipeline(transaction=False)
        for key, leases in _by_key(pairs).items():
            self._extend(keys=[KEY_PREFIX + key], args=[self._ms(), *leases], client=pipe)
        pipe.execute()
        return Taken(True, 0.0, 0.0)

    def _dispose(self) -> None:
        self.client.close()


class PostgresSlots(SlotStore):
    name = "postgresql"

    def __init__(self, url: str, timeout: float = 1.0, **kw: Any) -> None:
        super().__init__(**kw)
        self._errors = (sa_exc.DBAPIError, sa_exc.TimeoutError)  # down, or not migrated
        self.engine = store_engine(url, timeout)  # the rate limiter's bounds, its own pool
        self._next_purge = 0.0

    def _acquire(self, key: str, cap: int, lease: str) -> Taken:
        values = {"key": key, "lease": lease, "ttl": self.lease_s, "cap": cap}
        with self.engine.begin() as conn:
            conn.execute(_PG_LOCK, values)
            conn.execute(_PG_EXPIRE, values)
            before, taken = conn.execute(_PG_TAKE, values).one()
        self._purge_now_and_then()
        return Taken(bool(taken), 0.0 if taken else 1.0, float(before + taken))

    def _pairs(self, pairs: list[Pair]) -> dict[str, list[str]]:
        return {"keys": [key for key, _ in pairs], "leases": [lease for _, lease in pairs]}

    def _release(self, pairs: list[Pair]) -> None:
        with self.engine.begin() as conn:
            conn.execute(_PG_RELEASE, self._pairs(pairs))

    def _renew(self, pairs: list[Pair]) -> Taken:
        with self.engine.begin() as conn:
            conn.execute(_PG_RENEW, self._pairs(pairs) | {"ttl": self.lease_s})
        return Taken(True, 0.0, 0.0)

    def _dispose(self) -> None:
        self.engine.dispose()

    def _purge_now_and_then(self) -> None:
        now = time.monotonic()
        with self._lock:
            if now < self._next_purge:
                return
            self._next_purge = now + PURGE_EVERY_S
        try:
            with self.engine.begin() as conn:
                conn.execute(_PG_PURGE)
        except self._errors as exc:  # the take succeeded: a purge is only housekeeping
            log.warning("purging expired in-flight leases failed: %r", exc)


def build_slot_store(settings: Settings) -> SlotStore | None:
    """Redis if a Redis URL is set, else PostgreSQL if that is the database, else None
    (one replica: :class:`~gateway.proxy.concurrency.TenantConcurrency` counts alone)."""
    redis_url = settings.redis_url or settings.kv_redis_url
    if redis_url:
        return RedisSlots(redis_url)
    url = settings.resolved_database_url()
    if url.startswith("postgresql"):
        return PostgresSlots(url)
    return None
