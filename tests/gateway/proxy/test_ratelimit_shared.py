"""Issue 14: rate limits hold across gateway replicas — two live gateways on one
PostgreSQL database share each tenant's bucket through Redis or through
PostgreSQL itself, so a tenant cannot get N x rpm by spreading its requests.

Requests here are cheap on purpose: a body of ``{}`` takes a token (the limit is
checked before the body is read) and is answered 400, so no model runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import redis
from sqlalchemy import text

from gateway.app import Components
from gateway.errors import RateLimitError
from gateway.policy import TenantPolicy
from gateway.proxy.ratelimit import ALWAYS, LocalBuckets, RateLimiter, Taken
from gateway.proxy.ratelimit_shared import KEY_PREFIX, PURGE_AGE_S, PostgresBuckets, RedisBuckets
from gateway.tenants import TenantContext
from migrations.runner import upgrade_database
from prefix.model.loader import LoadedModel
from tests.gateway.conftest import (
    PG_SERVER_URL,
    Gateway,
    assert_openai_error,
    gateway_settings,
    running_gateway,
    smol_engine,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

REDIS_URL = "redis://127.0.0.1:6379/0"
RPM = 3


def _redis_up() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping())
    except redis.RedisError:
        return False


@pytest.fixture(params=["postgresql", "redis"])
def pair(
    request: pytest.FixtureRequest,
    pg_schema: str,
    smol_loaded: LoadedModel,
    tmp_path: Path,
) -> Iterator[tuple[Gateway, Gateway]]:
    if request.param == "redis" and not _redis_up():
        pytest.skip("Redis on 127.0.0.1:6379 is unreachable")
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    extra = {"redis_url": REDIS_URL} if request.param == "redis" else {}
    with ExitStack() as stack:
        gateways = []
        for name in ("one", "two"):
            settings = gateway_settings(tmp_path / name, url, semantic_enabled=False, **extra)
            parts = Components(engine=smol_engine(smol_loaded, num_blocks=16))
            gateways.append(stack.enter_context(running_gateway(settings, parts)))
        gw1, gw2 = gateways
        assert gw1.app.state.rate_limiter.store.name == request.param
        yield gw1, gw2


def _hit(gw: Gateway, key: str) -> httpx.Response:
    with gw.http(key, timeout=30) as c:
        return c.post("/v1/chat/completions", json={})


def test_a_tenant_gets_rpm_in_total_across_replicas(pair: tuple[Gateway, Gateway]) -> None:
    gw1, gw2 = pair
    limited, key = gw1.tenant("rl", TenantPolicy(rate_limit_rpm=RPM))
    _, other = gw1.tenant("rl-other", TenantPolicy(rate_limit_rpm=RPM))
    statuses = [_hit(gw, key).status_code for gw in (gw1, gw2, gw1)]
    assert statuses == [400, 400, 400]  # three tokens, taken on both replicas
    refused = _hit(gw2, key)  # per-replica buckets would still have two tokens here
    assert_openai_error(refused, 429)
    assert int(refused.headers["Retry-After"]) >= 1
    assert_openai_error(_hit(gw1, key), 429)
    # Positive control: another tenant's bucket is its own, on either replica.
    assert _hit(gw2, other).status_code == 400
    assert _hit(gw1, other).status_code == 400
    assert limited not in refused.text or "rate limit" in refused.text


def test_postgres_buckets_are_one_bucket_for_two_stores(pg_schema: str) -> None:
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    a, b = PostgresBuckets(url), PostgresBuckets(url)
    assert [a.take("t", 2)[0], b.take("t", 2)[0]] == [True, True]
    allowed, wait, tokens = a.take("t", 2)
    assert not allowed and 0 < wait <= 30.0  # one token per 30 s at 2 rpm
    assert tokens is not None and 0 <= tokens < 0.1  # what the headers report
    assert b.take("u", 2)[0]  # control: another tenant
    local_a, local_b = LocalBuckets(), LocalBuckets()  # what one process alone would do
    assert all(s.take("t", 2)[0] for s in (local_a, local_b, local_b))


def test_a_shared_store_that_is_down_lets_requests_through() -> None:
    down = RedisBuckets("redis://127.0.0.1:9/0", timeout=0.2)  # nothing listens on port 9
    assert down.take("t", 1) == Taken(True, 0.0, None)  # nothing known of the bucket
    assert down.take("t", 1) == Taken(True, 0.0, None)  # fail open, every time, no raise
    if _redis_up():  # control: the same store on a live Redis does limit
        live = RedisBuckets(REDIS_URL)
        tenant = f"t-{uuid.uuid4().hex}"
        try:
            assert live.take(tenant, 1)[0] and not live.take(tenant, 1)[0]
        finally:
            live.client.delete(KEY_PREFIX + tenant)


def test_a_store_that_hung_past_the_deadline_is_bypassed_like_a_failed_one(
    pg_schema: str,
) -> None:
    """The request path stops waiting for a store that hangs (gateway/db_rest.py) and
    says so: the breaker opens, so the requests behind it are let through at once
    instead of each holding a thread on the hung store."""
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    store = PostgresBuckets(url)
    tenant = f"t-{uuid.uuid4().hex}"
    assert store.take(tenant, 1)[0] and not store.take(tenant, 1)[0]  # the control: limits
    store.hung(TimeoutError("no answer within 2 s"))
    assert store.is_open
    bypassed = store.bypassed
    assert store.take(tenant, 1) == Taken(True, 0.0, None)  # let through, not asked
    assert store.bypassed == bypassed + 1


def test_a_tenant_created_again_does_not_inherit_the_deleted_ones_bucket(
    pair: tuple[Gateway, Gateway],
) -> None:
    # The deletion's drop of the bucket failed (the shared store was down then, which the
    # store survives by letting it pass): the bucket is keyed by the id minted at
    # creation, so the tenant created again under the same id starts full.
    gw1, gw2 = pair
    tenant_id = f"again-{uuid.uuid4().hex[:8]}"
    policy = TenantPolicy(rate_limit_rpm=1)
    gw1.admin.add_tenant("tests", tenant_id, None, policy)
    key = gw1.admin.issue_key("tests", tenant_id, "k").key
    assert _hit(gw1, key).status_code == 400  # its one token
    assert_openai_error(_hit(gw2, key), 429)  # control: the bucket is empty, shared
    gw1.admin.delete("tests", tenant_id)  # this admin has no limiter: nothing dropped
    gw1.admin.add_tenant("tests", tenant_id, None, policy)
    key = gw1.admin.issue_key("tests", tenant_id, "k").key
    again = _hit(gw2, key)
    assert again.status_code == 400 and again.headers["x-ratelimit-remaining-requests"] == "0"
    assert_openai_error(_hit(gw1, key), 429)  # and it is limited as before


def test_the_longest_tenant_id_has_a_bucket_on_every_store(pg_schema: str) -> None:
    # A tenant id may be 64 characters, the store's key column too: the bucket is keyed
    # by the 32-character id minted at creation, so the key always fits (before, the
    # id and the minted id together overflowed it, which read as the store being down
    # and let every tenant through unlimited).
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    stores = [PostgresBuckets(url)] + ([RedisBuckets(REDIS_URL)] if _redis_up() else [])
    for store in stores:
        limiter = RateLimiter(store=store)
        ctx = TenantContext("t" * 64, "t", TenantPolicy(rate_limit_rpm=1), 1, uuid.uuid4().hex)
        try:
            assert limiter.check(ctx)["x-ratelimit-remaining-requests"] == "0"
            with pytest.raises(RateLimitError):
                limiter.check(ctx)  # limited: the store answered
            assert not store.is_open and store.failures == 0
        finally:
            limiter.forget(ctx.tenant_id, ctx.namespace_id)


def test_postgres_drops_rows_that_stand_for_full_buckets(pg_schema: str) -> None:
    # A row untouched for longer than its deepest debt takes to refill (PURGE_AGE_S:
    # DEBT_MINUTES of the limit, plus a minute) is a full bucket, what a missing row means:
    # such rows (a deleted tenant whose drop failed, a removed limit, an earlier key)
    # are purged now and then, so the table does not grow with every tenant ever limited.
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    store = PostgresBuckets(url)
    try:
        assert store.take("stale", 5).allowed and store.take("fresh", 5).allowed
        # in debt (an answer's tokens past a minute's), idle 3 minutes: not yet full
        assert store.take("owing", 5, 250.0, ALWAYS).allowed
        with store.engine.begin() as conn:
            for tenant, age in (("stale", PURGE_AGE_S + 1), ("owing", 180)):
                conn.execute(
                    text("UPDATE rate_limit_buckets SET updated_at = updated_at - :age "
                         "WHERE tenant_id = :t"), {"age": age, "t": tenant},
                )  # fmt: skip
        store._next_purge = 0.0  # due now
        assert store.take("fresh", 5).allowed
        with store.engine.connect() as conn:
            left = conn.execute(text("SELECT tenant_id FROM rate_limit_buckets")).scalars()
            # the recent one is kept (control), and the debt is not forgiven
            assert sorted(left) == ["fresh", "owing"]
        assert not store.take("owing", 5, 0.0).allowed
        taken = store.take("stale", 5)  # and a purged tenant starts full, as it was
        assert taken.allowed and taken.tokens == 4.0
        # A backlog goes in batches, each bringing the next purge forward.
        with store.engine.begin() as conn:
            conn.execute(
                text("INSERT INTO rate_limit_buckets (tenant_id, tokens, updated_at, allowed) "
                     "SELECT 'old-' || g, 1, 0, true FROM generate_series(1, 2500) g")
            )  # fmt: skip
        store._next_purge = 0.0
        for _ in range(3):
            store.take("fresh", 5)
        with store.engine.connect() as conn:
            count = text("SELECT count(*) FROM rate_limit_buckets WHERE tenant_id LIKE 'old-%'")
            assert conn.execute(count).scalar() == 0
    finally:
        store.engine.dispose()
