"""A tenant's semantic rows without an embedder or an index: what admin calls on a
replica with the semantic layer off still owe the operator.

A replica started with ``CACHEGATE_SEMANTIC_ENABLED=false`` (an admin-only replica, a
rolling configuration change) shares the database with replicas that serve the cache.
An invalidation or a tenant delete that lands on it answered 200 with nothing removed,
and the other replicas went on serving the entries, the deleted tenant's questions and
answers kept for good (a review, session 41). :class:`StoreRows` does the same fence and
deletes as :meth:`semantic.cache.SemanticCache.invalidate`; each delete is logged, so the
replicas that serve the cache drop the vectors through their change feed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from semantic.fences import raise_fence
from semantic.store import EntryStore, StoredEntry


class SemanticRows(Protocol):
    """What the admin service invalidates through (a :class:`SemanticCache` is one)."""

    entries: EntryStore

    def fence(self, tenant: str) -> None: ...

    def invalidate(
        self,
        *,
        entry_id: int | None = None,
        partition_key: str | None = None,
        tenant: str | None = None,
    ) -> int: ...

    def get_entry(self, entry_id: int) -> StoredEntry: ...


def _utc_now() -> datetime:
    return datetime.now(UTC)


class StoreRows:
    """Fence and delete a tenant's rows in the entry store alone."""

    def __init__(self, entries: EntryStore, clock: Callable[[], datetime] = _utc_now) -> None:
        self.entries = entries
        self._clock = clock

    def fence(self, tenant: str) -> None:
        raise_fence(self.entries, tenant, self._clock().astimezone(UTC))

    def invalidate(
        self,
        *,
        entry_id: int | None = None,
        partition_key: str | None = None,
        tenant: str | None = None,
    ) -> int:
        """As :meth:`SemanticCache.invalidate`: one entry, a partition, a tenant's rows."""
        if entry_id is not None and (partition_key is not None or tenant is not None):
            raise ValueError("invalidate by entry_id alone, or by partition_key and/or tenant")
        if entry_id is not None:
            return len(self.entries.delete([entry_id]))
        if partition_key is None and tenant is None:
            raise ValueError("invalidate needs entry_id, partition_key or tenant")
        return len(self.entries.delete_where(partition_key=partition_key, tenant=tenant))

    def get_entry(self, entry_id: int) -> StoredEntry:
        return self.entries.get(entry_id)

    def close(self) -> None:
        self.entries.close()
