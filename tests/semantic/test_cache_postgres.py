"""The cache over the real PostgreSQL server, and over a database that is down."""

from __future__ import annotations

import time

import pytest

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.errors import StoreUnavailableError
from semantic.policy import SemanticPolicy
from semantic.store import EntryStore
from tests.semantic.helpers import PARAPHRASE, STORED, UNREACHABLE_PG_URL, ManualClock, chat, reply


@pytest.mark.postgres
def test_postgres_round_trip_hit_and_restart(
    embedder: Embedder, pg_url: str, clock: ManualClock
) -> None:
    store = EntryStore(pg_url)
    try:
        cache = SemanticCache(embedder, store, clock=clock)
        stored = cache.store(chat(STORED), reply(), SemanticPolicy(ttl_seconds=3600))
        assert stored.stored and stored.created
        assert not cache.store(chat(STORED.lower()), reply("v2")).created  # idempotent
        hit = cache.lookup(chat(PARAPHRASE))
        assert hit.hit and hit.entry_id == stored.entry_id and hit.answer == reply("v2")
        assert cache.lookup(chat(PARAPHRASE, tenant="tenant-b")).reason == "empty"

        cache.close()  # a clean shutdown writes the batched hit counts
        restarted = SemanticCache(embedder, EntryStore(pg_url), clock=clock)
        assert restarted.rebuild(progress=False) == 1
        again = restarted.lookup(chat(PARAPHRASE))
        assert again.hit and again.entry_id == stored.entry_id
        entry = restarted.get_entry(stored.entry_id or 0)
        assert entry.hit_count == 2 and entry.last_hit_at == clock.now
        assert restarted.invalidate(tenant="tenant-a") == 1
        assert restarted.lookup(chat(PARAPHRASE)).reason == "empty"
        restarted.entries.close()
    finally:
        store.close()


def test_database_down_raises_store_unavailable_quickly(
    embedder: Embedder, sqlite_url: str, clock: ManualClock
) -> None:
    healthy = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    healthy.store(chat(STORED), reply())
    # Same in-memory index, but the database is gone (nothing listens on port 1).
    down = SemanticCache(embedder, EntryStore(UNREACHABLE_PG_URL), healthy.index, clock=clock)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        down.lookup(chat(PARAPHRASE))
    with pytest.raises(StoreUnavailableError):
        down.store(chat("How do I close my account?"), reply())
    with pytest.raises(StoreUnavailableError):
        down.rebuild(progress=False)
    assert time.monotonic() - started < 5
    # A partition with nothing in it is answered without touching the database.
    assert down.lookup(chat(PARAPHRASE, tenant="tenant-b")).reason == "empty"
    healthy.entries.close()
