from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from semantic.errors import EntryNotFoundError, StoreUnavailableError
from semantic.store import EntryStore, NewEntry
from tests.semantic.helpers import UNREACHABLE_PG_URL

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Iterator[EntryStore]:
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    entry_store = EntryStore(url)
    yield entry_store
    entry_store.close()


def entry(question: str = "How do I reset my password?", **changes: object) -> NewEntry:
    vec = np.arange(1, 5, dtype=np.float32)
    fields: dict[str, object] = {
        "partition_key": "p" * 64,
        "tenant": "tenant-a",
        "question": question,
        "answer": {"choices": [{"message": {"content": "Click 'forgot'."}}], "usage": {}},
        "embedding": vec / np.linalg.norm(vec),
        "embedder_id": "emb:4:abc",
        "entities": {"number": ["12345"]},
        "expires_at": T0 + timedelta(hours=1),
        "ttl_seconds": 3600,
    }
    fields.update(changes)
    return NewEntry(**fields)  # type: ignore[arg-type]


def test_round_trip(store: EntryStore) -> None:
    stored, created = store.upsert(entry(), now=T0)
    assert created
    got = store.get(stored.id)
    assert got == stored
    assert got.question == "How do I reset my password?"
    assert got.normalized_question == "how do i reset my password"
    assert got.answer["choices"][0]["message"]["content"] == "Click 'forgot'."
    assert got.entities == {"number": ["12345"]}
    np.testing.assert_array_equal(got.embedding, entry().embedding)
    assert got.embedding.dtype == np.float32
    assert (got.created_at, got.updated_at, got.hit_count, got.last_hit_at) == (T0, T0, 0, None)
    assert got.expires_at == T0 + timedelta(hours=1)
    assert got.expires_at is not None and got.expires_at.tzinfo is not None


def test_datetimes_are_utc_whatever_zone_goes_in(store: EntryStore) -> None:
    tokyo = timezone(timedelta(hours=9))
    stored, _ = store.upsert(entry(expires_at=T0.astimezone(tokyo)), now=T0.astimezone(tokyo))
    got = store.get(stored.id)
    assert got.created_at == T0 and got.created_at.utcoffset() == timedelta(0)
    assert got.expires_at == T0
    with pytest.raises(ValueError, match="naive"):
        store.upsert(entry("another question"), now=datetime(2025, 1, 1))


def test_upsert_is_idempotent_per_partition_and_normalized_question(store: EntryStore) -> None:
    first, created = store.upsert(entry(), now=T0)
    later = T0 + timedelta(minutes=5)
    again, created_again = store.upsert(
        entry("how do i reset my password", answer={"v": 2}), now=later
    )
    assert created and not created_again
    assert again.id == first.id and store.count() == 1
    assert (again.answer, again.question, again.created_at, again.updated_at) == (
        {"v": 2},
        "how do i reset my password",
        T0,
        later,
    )
    # Positive control: another partition or another question is another row.
    store.upsert(entry(partition_key="q" * 64), now=T0)
    store.upsert(entry("How do I delete my account?"), now=T0)
    assert store.count() == 3 and store.count(partition_key="p" * 64) == 2


def test_record_hit_counts_and_can_slide_expiry(store: EntryStore) -> None:
    stored, _ = store.upsert(entry(), now=T0)
    store.record_hit(stored.id, at=T0 + timedelta(seconds=1))
    store.record_hit(stored.id, at=T0 + timedelta(seconds=2), expires_at=T0 + timedelta(hours=2))
    got = store.get(stored.id)
    assert got.hit_count == 2
    assert got.last_hit_at == T0 + timedelta(seconds=2)
    assert got.expires_at == T0 + timedelta(hours=2)


def test_deletes(store: EntryStore) -> None:
    a, _ = store.upsert(entry("q a"), now=T0)
    b, _ = store.upsert(entry("q b", tenant="tenant-b"), now=T0)
    c, _ = store.upsert(entry("q c", partition_key="q" * 64), now=T0)
    d, _ = store.upsert(entry("q d", expires_at=None), now=T0)
    assert store.delete([a.id, 10**9]) == [(a.id, "p" * 64)]
    with pytest.raises(EntryNotFoundError):
        store.get(a.id)
    assert store.delete_where(tenant="tenant-b") == [(b.id, "p" * 64)]
    assert store.delete_where(partition_key="q" * 64) == [(c.id, "q" * 64)]
    assert [e.id for e in store.iter_entries()] == [d.id]
    with pytest.raises(ValueError):
        store.delete_where()


def test_expiry_deletes(store: EntryStore) -> None:
    old, _ = store.upsert(entry("old"), now=T0)
    forever, _ = store.upsert(entry("forever", expires_at=None), now=T0)
    late = T0 + timedelta(hours=1)
    # A conditional delete keeps a row that is not expired at the given time.
    assert store.delete([old.id], expired_at=late - timedelta(seconds=1)) == []
    assert store.purge_expired(late) == [(old.id, "p" * 64)]
    assert [e.id for e in store.iter_entries()] == [forever.id]


def test_iter_entries_filters_by_embedder_and_pages(store: EntryStore) -> None:
    for i in range(7):
        store.upsert(entry(f"question {i}", embedder_id="emb:4:abc" if i % 2 else "x"), now=T0)
    got = list(store.iter_entries(embedder_id="emb:4:abc", batch_size=2))
    assert [e.question for e in got] == ["question 1", "question 3", "question 5"]
    assert store.count(embedder_id="x") == 4 and store.get_many([]) == {}


def test_unmigrated_database_is_unavailable(tmp_path: object) -> None:
    bare = EntryStore(f"sqlite:///{tmp_path}/bare.db")
    with pytest.raises(StoreUnavailableError, match="upgrade_database"):
        bare.count()


@pytest.mark.postgres
def test_unmigrated_postgres_schema_is_unavailable(pg_bare_url: str) -> None:
    bare = EntryStore(pg_bare_url)
    try:
        with pytest.raises(StoreUnavailableError, match="upgrade_database"):
            bare.count()
    finally:
        bare.close()


def test_unreachable_database_fails_fast() -> None:
    down = EntryStore(UNREACHABLE_PG_URL, connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        down.upsert(entry(), now=T0)
    assert time.monotonic() - started < 3
    assert "127.0.0.1" in str(info.value)
    with pytest.raises(StoreUnavailableError):
        down.get_many([1])


def test_missing_sqlite_directory_is_unavailable(tmp_path: object) -> None:
    with pytest.raises(StoreUnavailableError):
        EntryStore(f"sqlite:///{tmp_path}/no/such/dir/x.db").ping()


def test_sqlite_uses_wal(sqlite_url: str) -> None:
    store = EntryStore(sqlite_url)
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    store.close()


def test_ids_are_never_reused(store: EntryStore) -> None:
    # Another process's in-memory index may still hold a deleted id.
    first, _ = store.upsert(entry("q1"), now=T0)
    store.delete([first.id])
    second, _ = store.upsert(entry("q2"), now=T0)
    assert second.id > first.id
