"""Issue 14: the authentication cache holds only valid keys, is bounded, ages out
also during a database outage, and an unknown token costs at most one query per
``cache_seconds`` (real SQLite, migrated by the real history)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event

from gateway.admin.service import TenantAdmin
from gateway.auth_cache import MAX_NEGATIVE, MAX_STALE_SECONDS, AuthCache
from gateway.errors import AuthenticationError, ServiceUnavailableError
from gateway.tenants import TenantStore, hash_key
from migrations.runner import upgrade_database


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TenantStore]:
    url = f"sqlite:///{tmp_path / 'auth.db'}"
    upgrade_database(url)
    s = TenantStore(create_engine(url), cache_seconds=30.0)
    yield s
    s.engine.dispose()


def _queries(store: TenantStore) -> list[str]:
    seen: list[str] = []

    def on_execute(*args: Any) -> None:
        seen.append(str(args[2]))

    event.listen(store.engine, "before_cursor_execute", on_execute)
    return seen


def test_random_tokens_neither_grow_memory_nor_evict_valid_keys(store: TenantStore) -> None:
    admin = TenantAdmin(store, None, None)
    admin.add_tenant("tests", "acme", None, None)
    key = admin.issue_key("tests", "acme", "k").key
    assert store.authenticate(key).tenant_id == "acme"  # control: a valid key is cached
    for _ in range(MAX_NEGATIVE * 3):
        with pytest.raises(AuthenticationError):
            store.authenticate("cg-" + secrets.token_urlsafe(32))
    valid, negative = store.auth_cache.sizes()
    assert valid == 1 and negative == MAX_NEGATIVE  # bounded; before: one entry per token
    queries = _queries(store)
    assert store.cached(key) is not None and store.authenticate(key).tenant_id == "acme"
    assert queries == []  # the valid key survived the flood in the cache


def test_a_repeated_bad_token_costs_one_query_and_a_huge_one_none(store: TenantStore) -> None:
    queries = _queries(store)
    for _ in range(5):
        with pytest.raises(AuthenticationError):
            store.authenticate("cg-not-a-key")
    assert len(queries) == 1
    with pytest.raises(AuthenticationError):
        store.authenticate("x" * 100_000)
    assert len(queries) == 1


def test_known_keys_fail_open_during_an_outage_but_only_for_a_bounded_time(
    store: TenantStore, tmp_path: Path
) -> None:
    admin = TenantAdmin(store, None, None)
    admin.add_tenant("tests", "acme", None, None)
    key = admin.issue_key("tests", "acme", "k").key
    clock = Clock()
    store.auth_cache.clock = clock
    assert store.authenticate(key).tenant_id == "acme"
    (tmp_path / "auth.db").unlink()  # the database is gone: every query now fails
    store.engine.dispose()
    clock.now += 60  # past cache_seconds: the database is asked, fails, memory answers
    assert store.authenticate(key).tenant_id == "acme"
    with pytest.raises(ServiceUnavailableError):  # an unknown key is never let in
        store.authenticate("cg-unknown")
    clock.now += MAX_STALE_SECONDS  # too long without the database confirming it
    with pytest.raises(ServiceUnavailableError):
        store.authenticate(key)


def test_valid_entries_are_an_lru_with_a_bound() -> None:
    clock = Clock()
    cache: AuthCache[str] = AuthCache(10.0, max_entries=3, max_negative=2, clock=clock)
    for name in "abc":
        cache.put_valid(name, name.upper())
    assert cache.fresh("a") == "A"  # touched: "b" is now the oldest
    cache.put_valid("d", "D")
    assert cache.fresh("b") is None and cache.fresh("a") == "A" and cache.sizes() == (3, 0)
    clock.now += 10
    assert cache.fresh("a") is None and cache.stale("a") == "A"  # not fresh, still known
    cache.put_invalid("a")  # the database said no: it is gone from the valid side
    assert cache.stale("a") is None and cache.known_invalid("a")
    clock.now += 10
    assert not cache.known_invalid("a")  # a negative answer ages out too


def test_a_key_read_before_its_revocation_is_not_kept_after_it(
    store: TenantStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The read of a key and the feed's clear() can interleave: the key row is read, the
    # revocation commits and clears the cache, and only then would the read's answer be
    # cached, accepting the revoked key for cache_seconds (30 s here).
    admin = TenantAdmin(store, None, None)
    admin.add_tenant("tests", "acme", None, None)
    key = admin.issue_key("tests", "acme", "k").key
    read = store._load

    def racing(digest: str) -> Any:
        loaded = read(digest)
        store.invalidate_cache()  # a change lands while this answer is on its way back
        return loaded

    monkeypatch.setattr(store, "_load", racing)
    assert store.authenticate(key).tenant_id == "acme"  # this request was admitted
    assert store.cached(key) is None  # but its answer was not kept past the change
    with pytest.raises(AuthenticationError):
        store.authenticate("cg-issued-meanwhile")
    monkeypatch.setattr(store, "_load", read)
    assert not store.auth_cache.known_invalid(hash_key("cg-issued-meanwhile"))
    assert store.authenticate(key).tenant_id == "acme"
    assert store.cached(key) is not None  # control: an undisturbed read is kept


def test_a_change_to_one_tenant_keeps_the_others_keys_through_an_outage(
    store: TenantStore, tmp_path: Path
) -> None:
    # What the change feed does on every replica when another replica writes a tenant:
    # before, the whole cache was dropped, so a replica that then lost the database
    # refused (503) keys it had just confirmed.
    admin = TenantAdmin(store, None, None)
    for tenant in ("acme", "other", "gone"):
        admin.add_tenant("tests", tenant, None, None)
    keys = {t: admin.issue_key("tests", t, "k").key for t in ("acme", "other", "gone")}
    assert all(store.authenticate(k).tenant_id == t for t, k in keys.items())
    with pytest.raises(AuthenticationError):
        store.authenticate("cg-not-yet-issued")
    store.auth_cache.invalidate({"other"})  # e.g. a key issued or a policy edited
    assert store.cached(keys["acme"]) is not None and store.cached(keys["gone"]) is not None
    assert store.cached(keys["other"]) is None  # that tenant's keys are asked again
    assert not store.auth_cache.known_invalid(hash_key("cg-not-yet-issued"))  # may be new
    store.auth_cache.invalidate({"gone"})  # e.g. deleted: refused at once, from memory too
    (tmp_path / "auth.db").unlink()
    store.engine.dispose()
    assert store.authenticate(keys["acme"]).tenant_id == "acme"  # before: 503
    for tenant in ("other", "gone"):
        with pytest.raises(ServiceUnavailableError):
            store.authenticate(keys[tenant])
    store.auth_cache.invalidate(frozenset())  # after a rebuild anything may have changed
    with pytest.raises(ServiceUnavailableError):
        store.authenticate(keys["acme"])


def test_an_answer_read_before_its_tenants_change_is_not_kept() -> None:
    cache: AuthCache[Any] = AuthCache(30.0, tenant_of=lambda v: str(v))
    seen = cache.generation  # two reads start: acme's key, other's key, an unknown one
    cache.invalidate({"acme"})  # acme changes while they are on their way back
    cache.put_valid("a", "acme", seen)
    cache.put_valid("o", "other", seen)
    cache.put_invalid("x", seen)
    assert cache.fresh("a") is None  # could be the key just revoked
    assert cache.fresh("o") == "other"  # another tenant's answer is still true
    assert not cache.known_invalid("x")  # could be the key just issued
    cache.put_valid("a", "acme", cache.generation)  # read after the change: kept
    assert cache.fresh("a") == "acme" and cache.sizes() == (2, 0)
    seen = cache.generation
    cache.clear()
    cache.put_valid("o2", "other", seen)  # read before a clear: refused for every tenant
    assert cache.fresh("o2") is None


def test_the_remembered_changes_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.auth_cache.MAX_CHANGED_TENANTS", 3)
    cache: AuthCache[Any] = AuthCache(30.0, tenant_of=lambda v: str(v))
    cache.put_valid("k", "keep", cache.generation)
    seen = cache.generation
    for n in range(5):
        cache.invalidate({f"t{n}"})
    assert len(cache._changed) <= 3
    cache.put_valid("late", "keep", seen)  # older than a forgotten change: refused
    assert cache.fresh("late") is None
    assert cache.fresh("k") == "keep"  # nothing was dropped for it


def test_an_admin_write_here_drops_only_its_own_tenants_keys(store: TenantStore) -> None:
    # The same on the replica that makes the write: it used to clear every tenant's
    # authenticated keys, so an outage right after any admin write refused them all.
    admin = TenantAdmin(store, None, None)
    for tenant in ("acme", "other"):
        admin.add_tenant("tests", tenant, None, None)
    keys = {t: admin.issue_key("tests", t, "k").key for t in ("acme", "other")}
    assert all(store.authenticate(k).tenant_id == t for t, k in keys.items())
    admin.rename("tests", "other", "Other Corp")
    admin.add_tenant("tests", "third", None, None)
    assert store.cached(keys["acme"]) is not None  # kept
    assert store.cached(keys["other"]) is None  # its own tenant changed: asked again
    key_id = admin.list_keys("other")[0].id
    admin.revoke_key("tests", "other", key_id)
    with pytest.raises(AuthenticationError):  # control: a revocation still applies at once
        store.authenticate(keys["other"])
    admin.set_disabled("tests", "acme", True)
    assert store.cached(keys["acme"]) is None
