"""Backfills the pipeline must skip although the answer is good (gateway/proxy/
pipeline.py): the index's write lock held by a rebuild or snapshot (``skipped:busy``,
bounded wait), and a tenant deleted, maybe re-created, since the request was
authenticated (``skipped:tenant_deleted``), or a check of it after the store that the
database cannot answer (the entry withdrawn); and an id created again starts with no
entry an old tenant of it left. Each with its positive control. Real embedder and
validators, a real SQLite file."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy import exc as sa_exc

from gateway.admin.service import ConflictError, TenantAdmin
from gateway.errors import ServiceUnavailableError
from gateway.metrics import GatewayMetrics
from gateway.policy import TenantPolicy
from gateway.proxy.pipeline import Pipeline
from gateway.tenants import TenantContext, TenantStore
from semantic import Embedder, SemanticCache
from semantic.errors import StoreUnavailableError
from tests.gateway.proxy.pipeline_support import answer, backfill, body, ctx, lookup, real_cache


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "pipeline.db"


@pytest.fixture
def cache(embedder: Embedder, db_file: Path) -> Iterator[SemanticCache]:
    with real_cache(embedder, db_file) as semantic:
        yield semantic


def tenant_store(db_file: Path) -> TenantStore:
    return TenantStore(create_engine(f"sqlite:///{db_file}"))


def minted_as(tenants: TenantStore, tenant_id: str) -> TenantContext:
    """The tenant as a request authenticated now would carry it (its minted id)."""
    return TenantContext(tenant_id, tenant_id, TenantPolicy(), 1, tenants.namespace_id(tenant_id))


def test_a_backfill_does_not_wait_for_a_rebuild(cache: SemanticCache) -> None:
    # A rebuild (or an index snapshot) holds the write lock for seconds to minutes; the
    # answer the model already gave is skipped as busy instead of waiting for it.
    pipe, q = Pipeline(cache, GatewayMetrics()), body("What is the capital of Peru?")
    miss = lookup(pipe, ctx(), q)
    holding, release = threading.Event(), threading.Event()

    def rebuild() -> None:
        with cache.write_lock:
            holding.set()
            release.wait(30)

    rebuilder = threading.Thread(target=rebuild)
    rebuilder.start()
    try:
        assert holding.wait(10)
        started = time.monotonic()
        assert backfill(pipe, ctx(), miss, answer("Lima.")) == "skipped:busy"
        assert time.monotonic() - started < 10  # bounded: about BACKFILL_LOCK_WAIT
        assert miss.query is not None  # the store's own bound, past the room check
        stored = cache.store(miss.query, answer("Lima."), wait=0.05)
        assert not stored.stored and stored.reason == "busy"
    finally:
        release.set()
        rebuilder.join()
    # Positive control: once the lock is free the same answer is stored (and served).
    assert backfill(pipe, ctx(), miss, answer("Lima.")) == "stored"
    assert lookup(pipe, ctx(), q).status == "hit"


def test_a_backfill_for_a_tenant_deleted_meanwhile_is_not_stored(
    cache: SemanticCache, db_file: Path
) -> None:
    # A request authenticated before its tenant was deleted (and maybe re-created under
    # the same id) must not leave its answer to be listed and counted as the new one's.
    tenants = tenant_store(db_file)
    admin = TenantAdmin(tenants, None, None)
    admin.add_tenant("test", "gone", None, TenantPolicy())
    pipe = Pipeline(cache, GatewayMetrics(), minted_id=tenants.namespace_id)
    minted = minted_as(tenants, "gone")
    q1, q2 = body("What is the capital of Chile?"), body("What is the capital of Peru?")
    assert backfill(pipe, minted, lookup(pipe, minted, q1), answer("Santiago.")) == "stored"
    decision = lookup(pipe, minted, q2)
    admin.delete("test", "gone")
    admin.add_tenant("test", "gone", None, TenantPolicy())  # re-created: a new minted id
    assert backfill(pipe, minted, decision, answer("Lima.")) == "skipped:tenant_deleted"
    # (this admin has no cache to drop entries from: the first answer is still there)
    assert [e.question for e in cache.entries.iter_entries()] == ["What is the capital of Chile?"]


def test_a_delete_through_another_replica_during_the_store_leaves_no_entry(
    cache: SemanticCache, db_file: Path
) -> None:
    # The write lock is per process: another replica's delete can commit after the
    # check before the store and before the entry. The check after the store sees it
    # and takes the entry back out (the delete's sweep then finds nothing of it).
    tenants = tenant_store(db_file)
    admin = TenantAdmin(tenants, None, None)
    admin.add_tenant("test", "raced", None, TenantPolicy())
    minted = minted_as(tenants, "raced")
    calls = 0

    def deleted_after_first_check(tenant_id: str) -> str:
        nonlocal calls
        calls += 1
        if calls == 2:  # the replica's delete commits between the check and the store
            admin.delete("test", tenant_id)
        return tenants.namespace_id(tenant_id)

    pipe = Pipeline(cache, GatewayMetrics(), minted_id=deleted_after_first_check)
    q = body("What is the capital of Bolivia?")
    decision = lookup(pipe, minted, q)
    calls = 0  # the next call is the check before the store; the delete follows it
    # the first check passes; the delete commits; the second check catches it
    assert backfill(pipe, minted, decision, answer("Sucre.")) == "skipped:tenant_deleted"
    assert calls == 2  # both checks ran: the entry was stored, then taken back out
    assert list(cache.entries.iter_entries()) == []
    assert lookup(pipe, minted, q).status != "hit"
    # Positive control: a tenant that is not deleted keeps its answer, checked twice.
    admin.add_tenant("test", "kept", None, TenantPolicy())
    kept = minted_as(tenants, "kept")
    pipe = Pipeline(cache, GatewayMetrics(), minted_id=tenants.namespace_id)
    decision = lookup(pipe, kept, q)
    assert backfill(pipe, kept, decision, answer("Sucre.")) == "stored"
    assert lookup(pipe, kept, q).status == "hit"


def test_a_tenant_check_the_database_cannot_answer_withdraws_the_entry(
    cache: SemanticCache, db_file: Path
) -> None:
    # A delete through another replica commits, both its entry sweeps with it, after the
    # check before the store and before the entry; then the database fails the check
    # after the store. The entry was kept (the sweep "follows any delete": not this
    # one), listed and counted as the tenant's once the id was created again.
    tenants = tenant_store(db_file)
    admin = TenantAdmin(tenants, cache, None)
    admin.add_tenant("test", "blip", None, TenantPolicy())
    minted = minted_as(tenants, "blip")
    calls = 0

    def deleted_then_unreadable(tenant_id: str) -> str:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise sa_exc.OperationalError("SELECT", {}, Exception("test: database away"))
        minted_now = tenants.namespace_id(tenant_id)
        admin.delete("test", tenant_id)  # whole, before the entry commits
        return minted_now

    pipe = Pipeline(cache, GatewayMetrics(), minted_id=deleted_then_unreadable)
    decision = lookup(pipe, minted, body("What is the capital of Ecuador?"))
    calls = 0
    assert backfill(pipe, minted, decision, answer("Quito.")) == "error:store_unavailable"
    assert calls == 2
    assert cache.entries.count(tenant="blip") == 0  # before the fix: 1, the old tenant's
    admin.add_tenant("test", "blip", None, TenantPolicy())
    # Positive control: the tenant created again stores and is served its own answer.
    again = minted_as(tenants, "blip")
    pipe = Pipeline(cache, GatewayMetrics(), minted_id=tenants.namespace_id)
    q = body("What is the capital of Ecuador?")
    assert backfill(pipe, again, lookup(pipe, again, q), answer("Quito.")) == "stored"
    assert lookup(pipe, again, q).status == "hit"
    assert cache.entries.count(tenant="blip") == 1


def test_a_tenant_created_again_starts_with_no_entry_its_old_tenant_left(
    cache: SemanticCache, db_file: Path
) -> None:
    # An entry an old tenant of the id left behind (a replica that stored it during an
    # outage and died before it could take it back out) is deleted when the id is
    # created again; an existing tenant's entries are untouched by a failed create.
    tenants = tenant_store(db_file)
    admin = TenantAdmin(tenants, cache, None)
    for tenant_id in ("old", "kept"):
        admin.add_tenant("test", tenant_id, None, TenantPolicy())
    unchecked = Pipeline(cache, GatewayMetrics())  # no tenant check: the dead replica's
    for tenant_id in ("old", "kept"):
        context = TenantContext(tenant_id, tenant_id, TenantPolicy(), 1)
        decision = lookup(unchecked, context, body("What is the capital of Uruguay?"))
        assert backfill(unchecked, context, decision, answer("Montevideo.")) == "stored"
    admin.delete("test", "old")
    leftover = TenantContext("old", "old", TenantPolicy(), 1)
    decision = lookup(unchecked, leftover, body("What is the capital of Paraguay?"))
    assert backfill(unchecked, leftover, decision, answer("Asunción.")) == "stored"
    assert cache.entries.count(tenant="old") == 1
    admin.add_tenant("test", "old", None, TenantPolicy())
    assert cache.entries.count(tenant="old") == 0
    with pytest.raises(ConflictError):
        admin.add_tenant("test", "kept", None, TenantPolicy())
    assert cache.entries.count(tenant="kept") == 1  # the control: its own entry stays


def test_creating_a_tenant_while_the_semantic_store_is_away_is_a_503(
    cache: SemanticCache, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sweep of an old tenant's entries cannot run: the create is refused whole (as a
    # delete is), never a tenant created over entries it would be listed with.
    tenants = tenant_store(db_file)
    admin = TenantAdmin(tenants, cache, None)

    def away(**kwargs: object) -> list[tuple[int, str]]:
        raise StoreUnavailableError("test: the semantic store is away")

    monkeypatch.setattr(cache.entries, "delete_where", away)
    with pytest.raises(ServiceUnavailableError):
        admin.add_tenant("test", "later", None, TenantPolicy())
    assert tenants.namespace_id("later") == ""  # not created
    monkeypatch.undo()  # the positive control: once it answers, the tenant is created
    admin.add_tenant("test", "later", None, TenantPolicy())
    assert tenants.namespace_id("later")
