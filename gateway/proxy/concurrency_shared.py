"""In-flight slots shared by every gateway replica: leases in Redis, or PostgreSQL.

A tenant's ``max_concurrent_requests`` is its cap across the deployment, not per
replica: behind N replicas counted each on its own, a tenant could hold N × the cap
(LiteLLM's ``max_parallel_requests`` is shared through Redis for the same reason). A
request holds a *lease* in the shared store: a member of the tenant's set with an
expiry time, taken only while fewer than the cap are unexpired, in one atomic step on
the server with the server's clock (a Lua script in Redis; a transaction under an
advisory lock on the tenant's key in PostgreSQL).

A replica that dies with requests in flight cannot give their leases back, so a lease
lasts ``lease_s`` (30 s) and the replica renews the ones it holds every ``lease_s / 3``
on a thread of its own: a stream of ten minutes keeps its slot, a dead replica's slots
come back within ``lease_s``. A release is a round trip too, so that thread makes it
(the request's end never waits for the store), batched with the others waiting, and
tries again one that failed until its lease would have expired anyway.

When the store fails or hangs (a circuit breaker, as for the shared rate limit:
``gateway/proxy/ratelimit_shared.py``) the cap is counted on each replica instead,
which is what it was before session 49: degraded to N × the cap, never unlimited and
never refusing everyone. Each replica counts both kinds together (its leases in the
store and the requests it counted itself), so the switch either way admits no more
than the cap on that replica. A lease that expired while the store was away (for want
of renewals) is not put back: its request ends uncounted by the store.

:func:`build_slot_store` picks the store as the rate limiter does: Redis when a Redis
URL is set, else PostgreSQL when that is the database (table ``concurrency_leases``,
migration 0017), else none (SQLite: one replica, counted in memory).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from gateway.proxy.ratelimit import Taken
from gateway.proxy.ratelimit_shared import COOLDOWN_S, FailOpen, store_engine
from gateway.settings import Settings

log = logging.getLogger("cachegate.gateway.concurrency")

KEY_PREFIX = "cachegate:inflight:"
#: How long a lease lasts without a renewal: how soon a dead replica's slots come back.
LEASE_S = 30.0

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

Pair = tuple[str, str]  # (tenant key, lease id)


class SlotStore(FailOpen):
    """Leases of in-flight requests in a shared store, behind a circuit breaker: a take
    the breaker lets through unasked (or one that failed) says so (``tokens`` None), and
    the caller counts the request on its replica instead.

    Releases and renewals run on one worker thread, in batches (one round trip for all
    the releases waiting). A release is not subject to the breaker: one that fails (or
    a take that failed and may have landed) is kept and tried again at each round until
    its lease would have expired anyway (``releases_expired`` counts those)."""

    role = "in-flight slot"
    degraded = "counting each replica's own"

    def __init__(self, lease_s: float = LEASE_S, cooldown: float = COOLDOWN_S) -> None:
        super().__init__(cooldown)
        self.lease_s = lease_s
        self.releases_expired = 0
        self._held: dict[str, set[str]] = {}  # key -> the leases this replica holds
        self._releasing: dict[Pair, float] = {}  # -> monotonic time its lease is moot
        self._held_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None

    def acquire(self, key: str, cap: int) -> tuple[Taken, str]:
        """Take a lease of ``key``'s slots while fewer than ``cap`` are held: (the
        store's answer, the lease id). ``Taken.tokens`` is the leases held after the
        call, None when the store was not asked or failed; ``allowed`` False: refused."""
        lease = uuid.uuid4().hex
        asked = False

        def attempt() -> Taken:
            nonlocal asked
            asked = True
            return self._acquire(key, cap, lease)

        taken = self._guarded(attempt)
        if taken.tokens is not None and taken.allowed:
            with self._held_lock:
                self._held.setdefault(key, set()).add(lease)
        elif taken.tokens is None and asked:  # failed: it may have landed all the same
            self._give_back([(key, lease)])
        else:
            return taken, lease
        self._start()
        return taken, lease

    def release(self, key: str, lease: str) -> None:
        """Give a lease back: no longer renewed at once, deleted from the store by the
        worker (never on the caller's thread: the event loop's)."""
        with self._held_lock:
            leases = self._held.get(key)
            if leases is None or lease not in leases:
                return
            leases.discard(lease)
            if not leases:
                del self._held[key]
        self._give_back([(key, lease)])
        self._start()

    def held_for(self, key: str) -> int:
        """Leases of ``key`` this replica holds in the store."""
        with self._held_lock:
            return len(self._held.get(key, ()))

    def held_here(self) -> int:
        """Leases this replica holds (given back ones excluded)."""
        with self._held_lock:
            return sum(len(leases) for leases in self._held.values())

    def releasing(self) -> int:
        """Releases not yet confirmed by the store."""
        with self._held_lock:
            return len(self._releasing)

    def renew_now(self) -> None:
        """Renew every lease this replica holds (the worker does so every lease_s / 3)."""
        with self._held_lock:
            held = [(key, lease) for key, leases in self._held.items() for lease in leases]
        if held:
            self._guarded(lambda: self._renew(held))

    def flush_releases(self) -> None:
        """Delete the given-back leases from the store, all in one round trip."""
        now = time.monotonic()
        with self._held_lock:
            moot = [pair for pair, until in self._releasing.items() if until <= now]
            for pair in moot:
                del self._releasing[pair]
            self.releases_expired += len(moot)
            batch = list(self._releasing)
        if not batch:
            return
        try:
            self._release(batch)
        except self._errors as exc:
            self._failed(exc)  # kept: tried again at the next round
            return
        with self._held_lock:
            for pair in batch:
                self._releasing.pop(pair, None)
        self._ok()

    def close(self, timeout: float = 5.0) -> None:
        """Give back every lease still held (the process is going away), stop the worker
        and close the connections. A later take starts again (a lifespan may rerun)."""
        with self._held_lock:
            worker, self._worker = self._worker, None
            pairs = [(key, lease) for key, leases in self._held.items() for lease in leases]
            self._held.clear()
        self._give_back(pairs)
        if worker is not None:
            self._stop.set()
            self._wake.set()
            worker.join(timeout)
        self._run(self.flush_releases)  # on this thread, once more
        self._dispose()

    def _give_back(self, pairs: list[Pair]) -> None:
        if not pairs:
            return
        until = time.monotonic() + self.lease_s
        with self._held_lock:
            for pair in pairs:
                self._releasing[pair] = until
        self._wake.set()

    def _start(self) -> None:
        with self._held_lock:
            if self._worker is not None:
                return
            self._stop = stop = threading.Event()
            worker = self._worker = threading.Thread(
                target=self._work, args=(stop,), name="cachegate-slot-leases", daemon=True
            )
        try:
            worker.start()
        except RuntimeError:  # no thread to be had: the next call tries again
            log.exception("the in-flight lease worker did not start")
            with self._held_lock:
                self._worker = None

    def _work(self, stop: threading.Event) -> None:
        """Releases as they come (batched), renewals every lease_s / 3."""
        next_renewal = time.monotonic() + self.lease_s / 3
        while not stop.is_set():
            self._wake.wait(max(0.0, next_renewal - time.monotonic()))
            self._wake.clear()
            self._run(self.flush_releases)
            if time.monotonic() >= next_renewal:
                self._run(self.renew_now)
                next_renewal = time.monotonic() + self.lease_s / 3

    @staticmethod
    def _run(job: Callable[[], object]) -> None:
        try:
            job()
        except Exception:  # the worker must outlive any one call's error
            log.exception("a shared in-flight lease call failed")

    def _acquire(self, key: str, cap: int, lease: str) -> Taken:
        raise NotImplementedError

    def _release(self, pairs: list[Pair]) -> None:
        raise NotImplementedError

    def _renew(self, pairs: list[Pair]) -> Taken:
        raise NotImplementedError

    def _dispose(self) -> None:
        raise NotImplementedError


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


class SlotStoreCollector:
    """The store's breaker, read at scrape time: ``cachegate_concurrency_store_*``."""

    def __init__(self, store: SlotStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        labels = [self.store.name]
        failures = CounterMetricFamily(
            "cachegate_concurrency_store_failures",
            "Calls to the shared in-flight slot store (Redis or PostgreSQL) that failed",
            labels=["store"],
        )
        failures.add_metric(labels, self.store.failures)
        opened = GaugeMetricFamily(
            "cachegate_concurrency_store_open",
            "1 while the in-flight slot store's circuit breaker is open: each replica "
            "counts max_concurrent_requests on its own",
            labels=["store"],
        )
        opened.add_metric(labels, 1.0 if self.store.is_open else 0.0)
        expired = CounterMetricFamily(
            "cachegate_concurrency_store_releases_expired",
            "Leases given back that the store could not be told of before they expired "
            "(it was away): each held its tenant's slot until then",
            labels=["store"],
        )
        expired.add_metric(labels, self.store.releases_expired)
        yield from (failures, opened, expired)


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
