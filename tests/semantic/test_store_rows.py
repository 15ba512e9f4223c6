"""StoreRows (semantic/store_rows.py): a replica without the semantic layer fences and
deletes a tenant's rows as SemanticCache.invalidate does, each delete logged for the
replicas that serve the cache; never another tenant's. Real embedder (to store the
rows through a cache, as a serving replica does) and real SQLite."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.errors import EntryNotFoundError
from semantic.fences import is_fenced
from semantic.store import EntryStore
from semantic.store_rows import StoreRows
from tests.semantic.helpers import PARAPHRASE, STORED, ManualClock, chat, reply


def deletes_logged(store: EntryStore) -> int:
    """Changes logged that delete rows (one a row, or one a partition cleared)."""
    with store.engine.connect() as conn:
        found = conn.execute(
            text("SELECT count(*) FROM cache_changes WHERE op IN ('delete', 'clear_partition')")
        )
        return int(found.scalar_one())


def test_rows_are_fenced_and_deleted_without_an_embedder(
    sqlite_url: str, embedder: Embedder, clock: ManualClock
) -> None:
    serving = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    for tenant in ("tenant-a", "tenant-b"):
        assert serving.store(chat(STORED, tenant=tenant), reply()).stored
        assert serving.store(chat("What are your opening hours?", tenant=tenant), reply()).stored
    rows = StoreRows(EntryStore(sqlite_url), clock=clock)
    [one] = [e for e in serving.entries.iter_entries() if e.tenant == "tenant-a"][:1]
    assert rows.get_entry(one.id).question == one.question
    assert rows.invalidate(entry_id=one.id) == 1
    with pytest.raises(EntryNotFoundError):
        rows.get_entry(one.id)
    rows.fence("tenant-a")
    assert is_fenced(rows.entries, "tenant-a", clock())
    assert not is_fenced(rows.entries, "tenant-b", clock())  # the control
    assert rows.invalidate(tenant="tenant-a") == 1  # the other of its two
    assert serving.entries.count(tenant="tenant-a") == 0
    assert serving.entries.count(tenant="tenant-b") == 2  # never another tenant's
    assert deletes_logged(rows.entries) == 2  # the serving replicas' feed reads them
    key = serving.partition_key(chat(STORED, tenant="tenant-b"))
    assert rows.invalidate(partition_key=key, tenant="tenant-a") == 0  # narrowed: nothing
    assert rows.invalidate(partition_key=key, tenant="tenant-b") == 2
    assert not serving.lookup(chat(PARAPHRASE, tenant="tenant-b")).hit  # rows gone
    with pytest.raises(ValueError):
        rows.invalidate()
    with pytest.raises(ValueError):
        rows.invalidate(entry_id=1, tenant="tenant-a")
    rows.close()
