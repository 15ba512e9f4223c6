"""The shared rate-limit stores on their own (no gateway, no model): the PostgreSQL
bucket under a lock wait, and the fail-open circuit breaker in front of either store."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis
from prometheus_client import CollectorRegistry
from sqlalchemy import text

from gateway.errors import RateLimitError
from gateway.policy import TenantPolicy
from gateway.proxy.ratelimit import LocalBuckets, RateLimiter, Taken
from gateway.proxy.ratelimit_shared import PostgresBuckets, RedisBuckets
from gateway.tenants import TenantContext
from migrations.runner import upgrade_database
from tests.gateway.conftest import PG_SERVER_URL

NOW = "extract(epoch FROM clock_timestamp())"


@pytest.mark.postgres
def test_a_taker_that_waited_for_the_row_lock_does_not_turn_the_clock_back(
    pg_schema: str,
) -> None:
    """A take reads the server clock before it waits for the bucket's row lock. Before
    the fix it wrote that earlier time back as ``updated_at``, so the next take was
    credited the wait a second time: under concurrency far more than rpm got through
    (rpm=600, 1800 requests from 16 threads: 731-788 allowed)."""
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    buckets = PostgresBuckets(url, timeout=10.0)  # the lock wait below is not a failure
    rpm = 60  # one token a second
    try:
        assert buckets.take("t", rpm)[0]
        with buckets.engine.begin() as conn:  # empty, as of now
            conn.execute(text(f"UPDATE rate_limit_buckets SET tokens = 0, updated_at = {NOW}"))
        holder = buckets.engine.connect()  # another taker, holding the row
        holder.begin()
        holder.execute(text("SELECT 1 FROM rate_limit_buckets WHERE tenant_id = 't' FOR UPDATE"))
        waited: list[Taken] = []
        waiter = threading.Thread(target=lambda: waited.append(buckets.take("t", rpm)))
        waiter.start()  # reads the clock now, then waits for the lock
        time.sleep(1.5)
        # The holder takes the token that refilled meanwhile, as of its own (later) clock.
        holder.execute(text(f"UPDATE rate_limit_buckets SET tokens = 0, updated_at = {NOW}"))
        holder.commit()
        holder.close()
        waiter.join(10)
        assert waited and not waited[0][0]  # nothing refilled since the holder's take
        with buckets.engine.connect() as conn:
            lag = conn.execute(text(f"SELECT {NOW} - updated_at FROM rate_limit_buckets")).scalar()
        assert lag is not None and lag < 0.5, lag  # before: 1.5 s back, the wait
        # So the next take finds well under a token (before: the 1.5 s again, allowed).
        allowed, wait, tokens = buckets.take("t", rpm)
        assert not allowed and wait > 0.5 and tokens is not None and tokens < 0.5
        assert buckets.take("u", rpm)[0]  # control: another tenant's bucket is full
    finally:
        buckets.engine.dispose()


class _Script:
    """A Redis script call that hangs for ``hang`` seconds and times out, or answers."""

    def __init__(self, hang: float) -> None:
        self.hang, self.calls, self.answer = hang, 0, [0, 2000, 0]  # refused, 2 s to wait

    def __call__(self, keys: list[str], args: list[int]) -> list[int]:
        self.calls += 1
        if self.hang:
            time.sleep(self.hang)
            raise redis.TimeoutError("Timeout reading from socket")
        return self.answer


class _Client:
    def __init__(self, script: _Script) -> None:
        self.script = script

    def register_script(self, _source: str) -> _Script:
        return self.script


def _samples(registry: CollectorRegistry) -> dict[str, float]:
    return {
        s.name: s.value
        for family in registry.collect()
        for s in family.samples
        if s.name.startswith("cachegate_ratelimit_store") and s.labels == {"store": "redis"}
    }


def test_a_hanging_store_is_left_alone_then_probed_one_request_at_a_time() -> None:
    """Before: every limited request waited the store's timeout (0.25 s), on the thread
    pool the routes share with authentication: 7x less throughput while Redis hung."""
    script = _Script(hang=0.25)
    store = RedisBuckets("redis://unused", client=_Client(script))
    store.cooldown = 30.0
    now = [1000.0]
    store._now = lambda: now[0]
    limiter = RateLimiter(store=store)
    registry = CollectorRegistry()
    limiter.bind_metrics(registry)
    ctx = TenantContext("t", "t", TenantPolicy(rate_limit_rpm=1), 1)

    started = time.monotonic()
    for _ in range(20):  # the first call fails (0.25 s), the rest are let through at once
        limiter.check(ctx)
    assert script.calls == 1 and time.monotonic() - started < 1.0  # before: 20 calls, 5 s
    assert _samples(registry) == {
        "cachegate_ratelimit_store_failures_total": 1.0,
        "cachegate_ratelimit_store_bypassed_total": 20.0,
        "cachegate_ratelimit_store_open": 1.0,
    }

    now[0] += 31  # the cooldown is over: one request probes, the others do not wait for it
    prober = threading.Thread(target=limiter.check, args=(ctx,))
    prober.start()
    assert _wait_until(lambda: script.calls == 2)
    during = time.monotonic()
    limiter.check(ctx)
    assert time.monotonic() - during < 0.1 and script.calls == 2
    prober.join()
    assert store.is_open and store.failures == 2  # the probe failed: open again

    script.hang = 0  # the store is back: the next probe closes the breaker and limits again
    limiter.check(ctx)  # still within the new cooldown: let through, not asked
    assert script.calls == 2
    now[0] += 31
    with pytest.raises(RateLimitError):
        limiter.check(ctx)  # the probe: the store's answer (refused) counts again
    assert not store.is_open and script.calls == 3
    with pytest.raises(RateLimitError):
        limiter.check(ctx)  # closed: every request asks the store
    assert script.calls == 4 and _samples(registry)["cachegate_ratelimit_store_open"] == 0.0


def _wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_a_local_store_exports_the_series_at_zero() -> None:
    registry = CollectorRegistry()
    RateLimiter(store=LocalBuckets()).bind_metrics(registry)
    values = {
        s.name: (s.labels, s.value)
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }
    assert values == {
        "cachegate_ratelimit_store_failures_total": ({"store": "local"}, 0.0),
        "cachegate_ratelimit_store_bypassed_total": ({"store": "local"}, 0.0),
        "cachegate_ratelimit_store_open": ({"store": "local"}, 0.0),
    }
