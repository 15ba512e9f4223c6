"""Replaying change-log rows onto a second cache's index (what the application's
replica-sync feed calls): two caches over one real SQLite file and the real
embedder; replica B's index follows what A wrote only through ``replay``."""

from __future__ import annotations

from datetime import UTC, datetime

from semantic.cache import SemanticCache
from semantic.changes import CLEAR_PARTITION, DELETE, UPSERT, Change
from semantic.embedder import Embedder
from semantic.replay import replay
from semantic.store import EntryStore
from tests.semantic.helpers import STORED, chat, reply

HOURS = "What are your opening hours?"


def row(seq: int, op: str, key: str | None, entry_id: int | None = None, **kw: str) -> Change:
    return Change(seq, datetime.now(UTC), op, key, entry_id, kw.get("tenant"))


def stored(cache: SemanticCache, question: str) -> int:
    result = cache.store(chat(question), reply())
    assert result.stored and result.entry_id is not None, result
    return result.entry_id


def test_replay_follows_the_database_and_skips_foreign_ops(
    embedder: Embedder, sqlite_url: str
) -> None:
    a = SemanticCache(embedder, EntryStore(sqlite_url))
    b = SemanticCache(embedder, EntryStore(sqlite_url))
    try:
        key = a.partition_key(chat(STORED))
        first, second = stored(a, STORED), stored(a, HOURS)
        assert len(b.index) == 0  # B saw nothing yet: the indexes are per process

        upserts = [row(1, UPSERT, key, first), row(2, UPSERT, key, second)]
        done = replay(b, [*upserts, row(3, "tenant", None, tenant="tenant-a")])
        assert (done.added, done.removed) == (2, 0)  # the application's own op is skipped
        assert b.lookup(chat(STORED)).hit
        assert (replay(b, upserts).added, b.index.size(key)) == (2, 2)  # twice: no duplicate

        a.invalidate(entry_id=first)
        assert replay(b, [row(4, DELETE, key, first)]).removed == 1
        assert b.index.size(key) == 1 and not b.lookup(chat(STORED)).hit
        # An upsert met after its row was deleted drops the id instead of adding it.
        assert replay(b, [row(1, UPSERT, key, first)]).added == 0 and b.index.size(key) == 1

        # A clear reconciles with the database: only ids whose rows are gone leave.
        a.entries.delete_where(partition_key=key)
        assert replay(b, [row(5, CLEAR_PARTITION, key)]).removed == 1
        assert b.index.size(key) == 0
    finally:
        a.entries.close()
        b.entries.close()
