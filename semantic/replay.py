"""Replay logged changes (:mod:`semantic.changes`) onto this replica's index.

The application's replica-sync feed reads the log and hands the rows here; rows
of ops this package does not know (the application's own) are skipped.

Replay trusts the database's *current* state, not the order of the log: an
``upsert`` reloads its row (and drops the id when the row is gone), a
``clear_partition`` drops every id of the partition that the database no longer
holds, and a ``delete`` drops its id (ids are never reused, so a deleted id never
comes back). Each step is idempotent and they converge in any order, which is
what makes the feed simple: replaying a row twice, replaying this replica's own
writes, or meeting an upsert after the delete that followed it are all harmless.

Clearing a partition reconciles it with the database instead of dropping it
whole: the application may give each tenant its own partitions, but this package
lets tenants share a namespace, and a tenant-narrowed clear must not hide the
other tenant's entries on other replicas.

Everything runs under the cache's write lock, like the cache's own writes, so a
row this replica commits while a replay reads cannot be dropped by it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from semantic.cache import SemanticCache
from semantic.changes import CLEAR_PARTITION, DELETE, UPSERT, Change
from semantic.errors import InvalidVectorError
from semantic.store import StoredEntry


@dataclass(frozen=True)
class Replayed:
    """What one replay did to the index."""

    added: int
    removed: int


def replay(cache: SemanticCache, changes: Iterable[Change]) -> Replayed:
    """Apply the entry and partition rows among ``changes`` to ``cache``'s index."""
    upserts: dict[int, str | None] = {}
    deletes: dict[str, set[int]] = {}
    clears: set[str] = set()
    for change in changes:
        if change.op == UPSERT and change.entry_id is not None:
            upserts[change.entry_id] = change.partition_key
        elif change.op == DELETE and change.entry_id is not None and change.partition_key:
            deletes.setdefault(change.partition_key, set()).add(change.entry_id)
        elif change.op == CLEAR_PARTITION and change.partition_key:
            clears.add(change.partition_key)
    touched = [*upserts, *(i for ids in deletes.values() for i in ids)]
    memo = cache.entries.memo
    was_kept: set[int] = set()

    def forget() -> None:
        # The hit path's recently read rows (semantic/entry_memo.py): another replica
        # wrote them, and this one must read them again.
        was_kept.update(memo.forget(touched))
        for key in clears:
            memo.forget_partition(key)

    forget()  # before the lock too: a snapshot or rebuild can hold it for seconds
    with cache.write_lock:
        forget()  # and inside it, after any read that raced the first
        cache.settle()  # an entry whose fence went unread is not replayed before it
        generation = memo.generation()
        added, removed, rows = _upserts(cache, upserts)
        for key, ids in deletes.items():
            removed += cache.index.remove(key, ids)
        for key in sorted(clears):
            removed += _reconcile(cache, key)
        # The rows the hit path was serving from memory, just read as they are now, go
        # back: replaying this replica's own store would otherwise send its next hit to
        # the database (and, were the database down by then, to the model). The put is
        # dropped if any write forgot a row since ``generation`` (EntryMemo.put).
        memo.put([rows[i] for i in was_kept if i in rows], generation)
    return Replayed(added, removed)


def _upserts(
    cache: SemanticCache, upserts: dict[int, str | None]
) -> tuple[int, int, dict[int, StoredEntry]]:
    """(added, removed, the rows indexed): each upsert's row read again."""
    if not upserts:
        return 0, 0, {}
    rows = cache.entries.get_many(upserts)
    indexed: dict[int, StoredEntry] = {}
    unsettled = cache.unsettled.ids()  # a fence a blip left unread: not indexed yet
    added = removed = 0
    for entry_id, logged_key in upserts.items():
        row = None if entry_id in unsettled else rows.get(entry_id)
        key = logged_key
        if row is not None:
            key = row.partition_key
            try:
                if row.embedder_id == cache.embedder_id:
                    # Replaces the vector when the id is already indexed (VectorIndex.add
                    # tombstones the old position first).
                    cache.index.add(key, [entry_id], row.embedding.reshape(1, -1))
                    added += 1
                    indexed[entry_id] = row
                    continue
            except InvalidVectorError:
                pass  # a corrupt row is skipped, as rebuild() skips it
        if key is not None:  # gone, another embedder's or unusable: not searchable here
            removed += cache.index.remove(key, [entry_id])
    return added, removed, indexed


def _reconcile(cache: SemanticCache, key: str) -> int:
    index = cache.index.get(key)
    if index is None:
        return 0
    live = cache.entries.ids_in_partition(key)
    return cache.index.remove(key, [i for i in index.ids() if i not in live])
