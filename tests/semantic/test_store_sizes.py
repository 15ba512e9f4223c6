"""``EntryStore.tenant_size`` (semantic/store_sizes.py) reads the counts the triggers of
migration 0015 keep; after every kind of write the store makes (insert, update of a
question held, delete by id, a lazy expiry that finds a refreshed row, a partition or
tenant cleared, a purge) they equal what a GROUP BY over the entries says, on SQLite
and PostgreSQL, and another tenant's counts never move."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from migrations.runner import upgrade_database
from semantic.entries import NewEntry
from semantic.store import EntryStore
from semantic.store_sizes import TenantSize

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> EntryStore:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'sizes.db'}"
    else:
        url = str(request.getfixturevalue("pg_bare_url"))
    upgrade_database(url)
    return EntryStore(url)


def put(
    store: EntryStore, tenant: str, partition: str, question: str, expires: datetime | None = None
) -> int:
    vector = np.full(4, 0.5, dtype=np.float32)
    entry = NewEntry(
        partition, tenant, question, {"a": question}, vector, "emb", expires_at=expires
    )
    stored, _ = store.upsert(entry, now=NOW)
    return stored.id


def agrees(store: EntryStore, tenant: str) -> TenantSize:
    """The triggers' counts for ``tenant``, checked against the entries themselves."""
    truth = store.partition_sizes(tenant)
    size = store.tenant_size(tenant, "p1")
    assert size == TenantSize(sum(n for n, _ in truth.values()), len(truth), "p1" in truth)
    return size


def test_the_counts_follow_every_write(store: EntryStore) -> None:
    assert agrees(store, "a") == TenantSize(0, 0, False)
    ids = [put(store, "a", "p1", f"question {i}") for i in range(3)]
    put(store, "a", "p2", "question 0")
    put(store, "b", "p9", "question 0")  # the control tenant
    assert agrees(store, "a") == TenantSize(4, 2, True)
    put(store, "a", "p1", "question 0")  # held already: an update, not a new entry
    assert agrees(store, "a") == TenantSize(4, 2, True)
    store.delete([ids[0]])
    assert agrees(store, "a") == TenantSize(3, 2, True)
    store.delete([ids[1]], expired_at=NOW)  # not expired: a lazy expiry deletes nothing
    assert agrees(store, "a") == TenantSize(3, 2, True)
    put(store, "a", "p3", "soon gone", expires=NOW - timedelta(seconds=1))
    assert agrees(store, "a") == TenantSize(4, 3, True)
    assert store.tenant_size("a", "p3").has_partition
    store.purge_expired(NOW, tenant="a")
    assert agrees(store, "a") == TenantSize(3, 2, True)
    store.delete_where(partition_key="p1")
    assert agrees(store, "a") == TenantSize(1, 1, False)
    assert agrees(store, "b") == TenantSize(1, 1, False)  # untouched throughout
    store.delete_where(tenant="a")
    assert agrees(store, "a") == TenantSize(0, 0, False)
    assert agrees(store, "b") == TenantSize(1, 1, False)
