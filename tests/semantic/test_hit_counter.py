"""Hit counts written in batches: flushed, durable, and retried through an outage."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from semantic import Embedder, SemanticCache
from semantic.hit_counter import HitCounter
from semantic.store import EntryStore, NewEntry
from tests.semantic.helpers import chat, reply

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _entry(question: str) -> NewEntry:
    vec = np.arange(1, 5, dtype=np.float32)
    return NewEntry(
        partition_key="p" * 64,
        tenant="tenant-a",
        question=question,
        answer={"choices": [{"message": {"content": "Click 'forgot'."}}], "usage": {}},
        embedding=vec / np.linalg.norm(vec),
        embedder_id="emb:4:abc",
        expires_at=T0 + timedelta(hours=1),
        ttl_seconds=3600,
    )


@pytest.fixture
def store(sqlite_url: str) -> Iterator[EntryStore]:
    # A short busy timeout: a locked database is "unavailable" within a fraction of a second.
    entry_store = EntryStore(sqlite_url, connect_timeout=0.2)
    yield entry_store
    entry_store.close()


class WriterLock:
    """Another connection holding SQLite's write lock: every write elsewhere times
    out (a real outage of the writer); readers are not blocked (WAL)."""

    def __init__(self, url: str) -> None:
        self.conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)

    def __enter__(self) -> WriterLock:
        self.conn.execute("BEGIN EXCLUSIVE")
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


def _wait_for(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_counts_are_written_on_flush_and_survive_a_reopen(
    store: EntryStore, sqlite_url: str
) -> None:
    a, _ = store.upsert(_entry("How do I reset my password?"), now=T0)
    b, _ = store.upsert(_entry("How do I close my account?"), now=T0)
    counter = HitCounter(store, interval=3600)  # no background flush in this test
    counter.record(a.id, at=T0 + timedelta(seconds=1))
    counter.record(a.id, at=T0 + timedelta(seconds=3), expires_at=T0 + timedelta(hours=3))
    counter.record(a.id, at=T0 + timedelta(seconds=2), expires_at=T0 + timedelta(hours=2))
    counter.record(b.id, at=T0 + timedelta(seconds=5))
    assert store.get(a.id).hit_count == 0 and counter.pending() == 2  # nothing written yet
    assert counter.flush() and counter.pending() == 0
    counter.close()
    reopened = EntryStore(sqlite_url)
    try:
        got_a, got_b = reopened.get(a.id), reopened.get(b.id)
    finally:
        reopened.close()
    assert (got_a.hit_count, got_a.last_hit_at) == (3, T0 + timedelta(seconds=3))
    assert got_a.expires_at == T0 + timedelta(hours=3)  # the latest slid expiry
    assert (got_b.hit_count, got_b.expires_at) == (1, T0 + timedelta(hours=1))  # not slid


def test_the_background_thread_flushes(store: EntryStore) -> None:
    a, _ = store.upsert(_entry("How do I reset my password?"), now=T0)
    counter = HitCounter(store, interval=0.05)
    try:
        counter.record(a.id, at=T0)
        _wait_for(lambda: store.get(a.id).hit_count == 1)
    finally:
        counter.close()


def test_a_flush_during_an_outage_keeps_the_counts_and_retries(
    store: EntryStore, sqlite_url: str
) -> None:
    a, _ = store.upsert(_entry("How do I reset my password?"), now=T0)
    counter = HitCounter(store, interval=3600)
    counter.record(a.id, at=T0)
    counter.record(a.id, at=T0)
    with WriterLock(sqlite_url):
        assert counter.flush() is False  # no exception
        counter.record(a.id, at=T0 + timedelta(seconds=9))  # counted during the outage
        assert counter.failures == 1 and counter.pending() == 1
    assert counter.flush() is True
    got = store.get(a.id)
    assert (got.hit_count, got.last_hit_at) == (3, T0 + timedelta(seconds=9))
    counter.close()


def test_a_hit_during_an_outage_is_served_and_counted_later(
    embedder: Embedder, sqlite_url: str
) -> None:
    cache = SemanticCache(
        embedder, EntryStore(sqlite_url, connect_timeout=0.2), hit_flush_seconds=0.05
    )
    try:
        stored = cache.store(chat("How do I reset my password?"), reply())
        assert cache.hits is not None
        with WriterLock(sqlite_url):
            result = cache.lookup(chat("How do I reset my password?"))
            assert result.hit and result.entry_id == stored.entry_id  # served, no error
            _wait_for(lambda: cache.hits is not None and cache.hits.failures >= 2)
            assert cache.hits.pending() == 1
        assert stored.entry_id is not None
        entry = cache.get_entry(stored.entry_id)  # writes what is pending first
        assert entry.hit_count == 1 and cache.hits.pending() == 0
    finally:
        cache.close()
        cache.entries.close()


def test_hits_a_flush_is_writing_still_count_as_pending() -> None:
    """pending() read 0 while a flush held the batch, so a write that then failed put
    back hits that had read as written (a full run caught it between two retries)."""
    import threading

    entered, release = threading.Event(), threading.Event()

    class SlowSink:
        def record_hits(self, batch: object) -> None:
            entered.set()
            release.wait(5)

    counter = HitCounter(SlowSink(), interval=3600)
    counter.record(7, at=T0)
    assert counter.pending() == 1
    flushing = threading.Thread(target=counter.flush)
    flushing.start()
    try:
        assert entered.wait(5)
        assert counter.pending() == 1  # being written: not written yet
    finally:
        release.set()
        flushing.join(5)
    assert counter.pending() == 0  # the control: written
    counter.close()
