"""A tenant's ``max_concurrent_requests`` across replicas (gateway/proxy/concurrency_shared.py):
leases in the real Redis and the real PostgreSQL of this machine, two stores standing
for two replicas; then two live gateways on one database, each with a long stream."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry
from sqlalchemy import text

from gateway.app import Components
from gateway.errors import RateLimitError
from gateway.policy import TenantPolicy
from gateway.proxy.concurrency import Claim, TenantConcurrency
from gateway.proxy.concurrency_shared import SlotStore
from gateway.proxy.concurrency_stores import PostgresSlots, RedisSlots
from gateway.proxy.ratelimit import Taken
from gateway.proxy.ratelimit_shared import store_engine
from gateway.tenants import TenantContext
from migrations.runner import upgrade_database
from prefix.model.loader import LoadedModel
from tests.gateway.conftest import (
    PG_SERVER_URL,
    Gateway,
    gateway_settings,
    running_gateway,
    wait_until,
)
from tests.gateway.proxy.test_client_disconnect import slow_engine

pytestmark = [pytest.mark.postgres]

REDIS_URL = "redis://127.0.0.1:6379/0"


def _redis_up() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping())
    except redis.RedisError:
        return False


class Stores:
    """Stores of one kind on one server, each standing for a replica; ``away`` cuts one
    replica off its store (a client of a closed port) until the block ends."""

    def __init__(self, kind: str, url: str) -> None:
        self.kind, self.url = kind, url
        self.made: list[SlotStore] = []

    def make(self, **kw: Any) -> SlotStore:
        store: SlotStore = (
            RedisSlots(REDIS_URL, **kw) if self.kind == "redis" else PostgresSlots(self.url, **kw)
        )
        self.made.append(store)
        return store

    @contextmanager
    def away(self, store: SlotStore) -> Iterator[None]:
        if isinstance(store, RedisSlots):
            live = store.client
            store.client = redis.Redis.from_url("redis://127.0.0.1:9/0", socket_timeout=0.2)
            try:
                yield
            finally:
                store.client = live
            return
        assert isinstance(store, PostgresSlots)
        live_engine = store.engine
        store.engine = store_engine("postgresql+psycopg://postgres@127.0.0.1:9/test", 0.5)
        try:
            yield
        finally:
            store.engine = live_engine


@pytest.fixture(params=["postgresql", "redis"])
def stores(request: pytest.FixtureRequest, pg_schema: str) -> Iterator[Stores]:
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    if request.param == "redis" and not _redis_up():
        pytest.skip("Redis on 127.0.0.1:6379 is unreachable")
    if request.param == "postgresql":
        upgrade_database(url)
    made = Stores(request.param, url)
    yield made
    for store in made.made:
        store.close()


def _key() -> str:
    return f"t-{uuid.uuid4().hex}"  # Redis is shared with other runs: a key of its own


def test_two_replicas_share_the_cap_and_get_slots_back(stores: Stores) -> None:
    one, two = stores.make(), stores.make()
    key, other = _key(), _key()
    (a, lease_a), (b, _) = one.acquire(key, 2), two.acquire(key, 2)
    assert a.allowed and b.allowed and a.tokens == 1.0 and b.tokens == 2.0
    for store in (one, two):  # the third, on either replica
        refused, _ = store.acquire(key, 2)
        assert not refused.allowed and refused.tokens == 2.0
    assert two.acquire(other, 2)[0].allowed  # control: another tenant has its own
    one.release(key, lease_a)
    one.release(key, lease_a)  # twice is once
    assert one.held_here() == 0
    assert wait_until(lambda: two.acquire(key, 2)[0].allowed, timeout=10)
    assert not one.is_open and one.failures == 0 and two.failures == 0


def test_a_dead_replicas_leases_expire_and_a_live_ones_are_renewed(
    stores: Stores,
) -> None:
    dead, live, other = stores.make(lease_s=1.0), stores.make(lease_s=1.0), stores.make()
    key_dead, key_live = _key(), _key()
    assert dead.acquire(key_dead, 1)[0].allowed
    assert live.acquire(key_live, 1)[0].allowed  # its worker renews every ~0.33 s
    with stores.away(dead):  # no renewal reaches the store: as a replica that died
        assert not other.acquire(key_dead, 1)[0].allowed  # held while the lease runs
        time.sleep(2.0)
        assert other.acquire(key_dead, 1)[0].allowed  # the dead one's slot came back
        assert not other.acquire(key_live, 1)[0].allowed  # the live one's is still held
    assert live.held_here() == 1 and live.failures == 0 and dead.failures > 0


def test_a_store_that_is_down_or_not_migrated_counts_on_the_replica(pg_schema: str) -> None:
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"  # no migration ran
    stores = [RedisSlots("redis://127.0.0.1:9/0", timeout=0.2), PostgresSlots(url)]
    for store in stores:
        taken, _ = store.acquire(_key(), 1)
        assert taken.allowed and taken.tokens is None  # not known: the caller counts
        # failed (and the worker's give-back of a take that may have landed, too)
        assert store.is_open and store.failures >= 1
        slots = TenantConcurrency(store)
        ctx = TenantContext("t", "t", TenantPolicy(max_concurrent_requests=1), 1, _key())
        assert not slots.asks_store(ctx)  # the breaker rests: counted here at once
        registry = CollectorRegistry()
        slots.bind_metrics(registry)
        labels = {"store": store.name}
        assert registry.get_sample_value("cachegate_concurrency_store_open", labels) == 1.0
        assert registry.get_sample_value("cachegate_concurrency_store_failures_total", labels)
        release = slots.acquire_shared(ctx, Claim())
        assert release is not None and slots.in_flight(ctx) == 1
        with pytest.raises(RateLimitError):  # the cap still holds, on this replica
            slots.acquire_shared(ctx, Claim())
        release()
        assert slots.in_flight(ctx) == 0
        store.close()
    upgrade_database(url)  # control: migrated, the same database shares the count
    migrated = PostgresSlots(url)
    key = _key()
    assert migrated.acquire(key, 1)[0].tokens == 1.0 and not migrated.acquire(key, 1)[0].allowed
    registry = CollectorRegistry()
    TenantConcurrency(migrated).bind_metrics(registry)
    assert (
        registry.get_sample_value("cachegate_concurrency_store_open", {"store": "postgresql"}) == 0
    )
    migrated.close()


def test_a_take_that_lands_after_its_request_gave_up_is_given_back(
    stores: Stores,
) -> None:
    """The request path stops waiting for a store that hangs, and a client may leave
    while the take is out: whichever comes second gives the lease back."""
    store = stores.make()
    slots = TenantConcurrency(store)
    ctx = TenantContext("t", "t", TenantPolicy(max_concurrent_requests=1), 1, _key())
    claim = Claim()
    claim.abandon()  # the request gave up first
    assert slots.acquire_shared(ctx, claim) is None  # the take landed: given back at once
    assert store.held_here() == 0
    kept = Claim()
    got: list[object] = []

    def take() -> bool:  # the worker deletes the given-back lease from the store
        try:
            got.append(slots.acquire_shared(ctx, kept))
        except RateLimitError:
            return False
        return True

    assert wait_until(take)
    assert got[0] is not None and store.held_here() == 1
    kept.abandon()  # given up after it landed: released by the giving up
    assert store.held_here() == 0


def test_postgres_purges_expired_leases_of_quiet_tenants(pg_schema: str) -> None:
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    store = PostgresSlots(url)
    with store.engine.begin() as conn:  # a dead replica's lease of a tenant gone quiet
        conn.execute(
            text(
                "INSERT INTO concurrency_leases VALUES "
                "('quiet', 'x', extract(epoch FROM clock_timestamp()) - 3600)"
            )
        )
    assert store.acquire(_key(), 1)[0].allowed  # another tenant's take purges
    with store.engine.connect() as conn:
        keys = conn.execute(text("SELECT slot_key FROM concurrency_leases")).scalars().all()
    assert "quiet" not in keys and len(keys) == 1
    store.close()


def test_a_release_the_store_missed_is_made_when_it_is_back(stores: Stores) -> None:
    """A release is not subject to the breaker: one that failed, or that came while the
    breaker was open, is kept and made at the next round once the store answers."""
    one, two = stores.make(), stores.make()
    key = _key()
    _, first = one.acquire(key, 2)
    _, second = one.acquire(key, 2)
    with stores.away(one):
        one.release(key, first)
        assert wait_until(lambda: one.is_open)  # the worker's release failed
        one.release(key, second)  # while the breaker is open
        one.flush_releases()
        assert one.releasing() == 2 and one.held_here() == 0
        assert not two.acquire(key, 2)[0].allowed  # both still held in the store
    one.flush_releases()  # the next round (the worker's, within lease_s / 3)
    assert one.releasing() == 0 and not one.is_open and one.releases_expired == 0
    assert [two.acquire(key, 2)[0].allowed for _ in range(3)] == [True, True, False]


def test_a_replica_counts_its_leases_and_its_own_together_as_the_store_comes_and_goes(
    stores: Stores,
) -> None:
    store = stores.make()
    slots = TenantConcurrency(store)
    ctx = TenantContext("t", "t", TenantPolicy(max_concurrent_requests=2), 1, _key())
    leased = slots.acquire_shared(ctx, Claim())  # in the store
    assert leased is not None and store.held_for(ctx.namespace_id) == 1
    with stores.away(store):
        local = slots.acquire_shared(ctx, Claim())  # the store fails: counted here
        assert local is not None and slots.in_flight(ctx) == 1
        with pytest.raises(RateLimitError):  # one leased + one here: the cap of 2
            slots.acquire_shared(ctx, Claim())
    store.flush_releases()
    store._ok()  # the breaker closes (as a probe's success would)
    leased()
    assert wait_until(lambda: store.releasing() == 0)
    assert slots.acquire_shared(ctx, Claim()) is not None  # in the store: 1 + 1 here
    with pytest.raises(RateLimitError):  # the store holds 1, this replica 1 of its own
        slots.acquire_shared(ctx, Claim())
    local()
    assert slots.acquire_shared(ctx, Claim()) is not None  # room again, in the store
    assert store.held_for(ctx.namespace_id) == 2


def test_closing_gives_back_what_is_held_and_a_later_take_starts_again(stores: Stores) -> None:
    one, two = stores.make(), stores.make()
    key = _key()
    assert one.acquire(key, 1)[0].allowed
    one.close()  # the process is going away: its leases are deleted, not left to expire
    assert two.acquire(key, 1)[0].allowed
    other = _key()
    taken, lease = one.acquire(other, 1)  # a lifespan that runs again
    assert taken.allowed
    one.release(other, lease)
    assert wait_until(lambda: two.acquire(other, 1)[0].allowed)  # its worker runs again


def test_postgres_takes_hold_the_cap_under_any_default_isolation(pg_schema: str) -> None:
    """The advisory lock serialises takes under READ COMMITTED only; the store pins it,
    so a server whose default is REPEATABLE READ still admits exactly the cap."""
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    strict = url + "%20-cdefault_transaction_isolation%3Drepeatable%5C%20read"
    pair = [PostgresSlots(strict), PostgresSlots(strict)]
    with pair[0].engine.connect() as conn:  # control: the server's default is changed
        assert conn.execute(text("SHOW default_transaction_isolation")).scalar() == (
            "repeatable read"
        )
    for _ in range(3):
        key = _key()
        results: list[Taken] = []
        barrier = threading.Barrier(12)

        def take(
            store: SlotStore,
            key: str = key,
            results: list[Taken] = results,
            barrier: threading.Barrier = barrier,
        ) -> None:
            barrier.wait()
            results.append(store.acquire(key, 3)[0])

        threads = [threading.Thread(target=take, args=(pair[i % 2],)) for i in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(r.allowed and r.tokens is not None for r in results) == 3
        assert all(r.tokens is not None for r in results)  # every one answered
    for store in pair:
        store.close()


# ------------------------------------------------------------ two live replicas

LONG = 60


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["postgresql", "redis"])
def test_a_tenant_holds_its_cap_in_total_across_two_gateways(
    kind: str, pg_schema: str, tiny_llama: LoadedModel, tmp_path: Path
) -> None:
    if kind == "redis" and not _redis_up():
        pytest.skip("Redis on 127.0.0.1:6379 is unreachable")
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    extra = {"redis_url": REDIS_URL} if kind == "redis" else {}
    with ExitStack() as stack:
        gws: list[Gateway] = []
        for name in ("one", "two"):
            settings = gateway_settings(tmp_path / name, url, semantic_enabled=False, **extra)
            parts = Components(engine=slow_engine(tiny_llama, max_num_seqs=4))
            gws.append(stack.enter_context(running_gateway(settings, parts)))
        one, two = gws
        assert one.app.state.concurrency.shared.name == kind
        _, key = one.tenant("capped", TenantPolicy(max_concurrent_requests=2))
        _, other = one.tenant("other", TenantPolicy(max_concurrent_requests=2))
        body = {"model": one.model, "prompt": "one two three", "ignore_eos": True}
        long = {"stream": True, "max_tokens": LONG}  # ~2 s, slowed steps
        statuses: list[int] = []

        def stream(gw: Gateway) -> None:
            with (
                gw.http(key) as client,
                client.stream("POST", "/v1/completions", json=body | long) as r,
            ):
                statuses.append(r.status_code)
                for _ in r.iter_bytes():
                    pass

        threads = [threading.Thread(target=stream, args=(gw,), daemon=True) for gw in gws]
        for thread in threads:
            thread.start()
        stores = [gw.app.state.concurrency.shared for gw in gws]
        assert wait_until(lambda: [store.held_here() for store in stores] == [1, 1])
        short = body | {"max_tokens": 2}
        for gw in gws:  # one slot held on each replica: the third is refused on both
            with gw.http(key) as client:
                r = client.post("/v1/completions", json=short)
            assert r.status_code == 429, r.text
            assert r.json()["error"]["code"] == "too_many_concurrent_requests"
        with two.http(other) as client:  # control: another tenant is served meanwhile
            assert client.post("/v1/completions", json=short).status_code == 200
        for thread in threads:
            thread.join(timeout=60)
        assert statuses == [200, 200]

        def served_again() -> bool:
            with one.http(key) as client:
                return client.post("/v1/completions", json=short).status_code == 200

        assert wait_until(served_again, timeout=15)  # the streams gave their leases back
