"""A partition carried over to a new embedder on one replica reaches the other through
the change feed, over the real PostgreSQL server: replica B serves the carried entry
without carrying anything itself, and the old rows are gone from both. Real MiniLM
(the old embedder) and the same weights under another id (the new one)."""

from __future__ import annotations

import pytest

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.migrate import PartitionMigrator
from semantic.model_files import bundled_model_path
from semantic.store import EntryStore
from tests.gateway.sync.feed_support import feeding, hits, wait_for
from tests.semantic.helpers import PARAPHRASE, STORED, chat, reply


@pytest.fixture(scope="module")
def other_embedder() -> Embedder:
    """The same weights loaded by path under another name: another embedder id."""
    return Embedder(bundled_model_path(), name="minilm-by-path", progress=False)


@pytest.mark.postgres
def test_a_carried_partition_reaches_the_other_replica(
    embedder: Embedder, other_embedder: Embedder, pg_url: str
) -> None:
    old = SemanticCache(embedder, EntryStore(pg_url))
    assert old.store(chat(STORED), reply("stored answer")).stored
    assert old.store(chat(STORED, tenant="tenant-b"), reply("b's answer")).stored
    a = SemanticCache(other_embedder, EntryStore(pg_url))
    b = SemanticCache(other_embedder, EntryStore(pg_url))
    for replica in (a, b):
        assert replica.rebuild(progress=False) == 0  # nothing of the new embedder yet
    migrator_a = PartitionMigrator.for_store(a)
    try:
        with feeding(pg_url, b, poll_seconds=1.0):
            query = chat(PARAPHRASE)
            assert not b.lookup(query).hit  # control: nothing carried yet
            scheduled = migrator_a.touch(query, a.partition_key(query))
            assert scheduled is not None and scheduled.result(timeout=60)[0].written == 1
            assert a.lookup(query).hit
            # B never ran a migration: the move's logged rows brought it the entry
            assert wait_for(hits(b, query), timeout=10) is not None
            served = b.lookup(query)
            assert served.answer is not None
            assert served.answer["choices"][0]["message"]["content"] == "stored answer"
            # and tenant-b's partition, not carried, is not served from tenant-a's
            assert not b.lookup(chat(PARAPHRASE, tenant="tenant-b")).hit
        # B's own migrator finds tenant-a's partition gone, tenant-b's still there
        migrator_b = PartitionMigrator.for_store(b)
        try:
            assert migrator_b.touch(query, b.partition_key(query)) is None
            other = chat(PARAPHRASE, tenant="tenant-b")
            moved = migrator_b.touch(other, b.partition_key(other))
            assert moved is not None and moved.result(timeout=60)[0].written == 1
            assert b.lookup(other).hit
        finally:
            migrator_b.close()
        assert old.entries.count(embedder_id=embedder.embedder_id) == 0
    finally:
        migrator_a.close()
        for cache in (old, a, b):
            cache.entries.close()
