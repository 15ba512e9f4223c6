"""The shared rate-limit check runs on threads of its own (gateway/proxy/access.py): a
database pool held by hung calls (a store that hangs) or busy with backfills made every
limited request wait out the 2 s deadline, read as a rate-limit store that hangs, and
go through unlimited while Redis answered (a review, session 41). And with the
breaker open no thread is taken at all. Real Redis."""

from __future__ import annotations

import asyncio
import threading
import time
import types
import uuid
from typing import Any

import pytest

import gateway.proxy.access as access
from gateway.db_rest import DB_THREADS, within
from gateway.errors import RateLimitError
from gateway.policy import TenantPolicy
from gateway.proxy.access import rate_limit
from gateway.proxy.ratelimit import RateLimiter, bucket_key
from gateway.proxy.ratelimit_shared import KEY_PREFIX, RedisBuckets
from gateway.tenants import TenantContext

pytestmark = [pytest.mark.redis]

URL = "redis://127.0.0.1:6379/0"


def request_for(limiter: RateLimiter) -> Any:
    app = types.SimpleNamespace(state=types.SimpleNamespace(rate_limiter=limiter))
    return types.SimpleNamespace(app=app, state=types.SimpleNamespace())


async def outcome(limiter: RateLimiter, ctx: TenantContext) -> tuple[str, float]:
    start = time.perf_counter()
    try:
        await rate_limit(request_for(limiter), ctx)
        said = "allowed"
    except RateLimitError:
        said = "429"
    return said, time.perf_counter() - start


def test_a_busy_database_pool_does_not_switch_the_limits_off() -> None:
    store = RedisBuckets(URL)
    limiter = RateLimiter(store=store)
    tenant = f"pool-{uuid.uuid4().hex}"
    ctx = TenantContext(tenant, tenant, TenantPolicy(rate_limit_rpm=1), 1, tenant)
    release = threading.Event()

    async def run() -> list[tuple[str, float]]:
        hung = [asyncio.ensure_future(within(30, release.wait, 30)) for _ in range(DB_THREADS)]
        await asyncio.sleep(0.1)  # every database thread is held
        try:
            return [await outcome(limiter, ctx) for _ in range(3)]
        finally:
            release.set()
            await asyncio.gather(*hung, return_exceptions=True)

    try:
        said = asyncio.run(run())
    finally:
        store.client.delete(KEY_PREFIX + bucket_key(tenant, tenant))
    assert [s for s, _ in said] == ["allowed", "429", "429"]  # was allowed ×3, 2 s each
    assert all(seconds < 1.0 for _, seconds in said), said
    assert not store.is_open and store.failures == 0  # Redis was never blamed


def test_an_open_breaker_lets_checks_through_without_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = RedisBuckets(URL)
    limiter = RateLimiter(store=store)
    tenant = f"open-{uuid.uuid4().hex}"
    ctx = TenantContext(tenant, tenant, TenantPolicy(rate_limit_rpm=1), 1, tenant)
    try:
        assert asyncio.run(outcome(limiter, ctx))[0] == "allowed"  # the control: asked
        store.hung(TimeoutError("no answer within 2 s"))

        async def no_thread(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a thread was taken while the breaker was open")

        monkeypatch.setattr(access, "within", no_thread)
        bypassed = store.bypassed
        assert asyncio.run(outcome(limiter, ctx))[0] == "allowed"  # not enforced, at once
        assert store.bypassed == bypassed + 1
    finally:
        store.client.delete(KEY_PREFIX + bucket_key(tenant, tenant))
