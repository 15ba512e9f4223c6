"""How much a tenant holds: what its bounds are checked against (gateway/proxy/semantic_limits.py).

:meth:`SizeQueries.tenant_size` reads the tenant's rows of ``semantic_partition_sizes``,
which triggers keep in the transaction of every change to ``semantic_entries``
(migration 0015): a read of one row a partition, where counting the entries was a GROUP
BY over all of them (50-120 ms at 100,000 entries on PostgreSQL, under the cache's write
lock that every tenant's backfills share). What only an eviction needs, the order in
which partitions and entries were last used, is still read from the entries
(:meth:`partition_sizes`, :meth:`oldest_ids`), and only at a bound.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from semantic.models import PartitionSize, SemanticEntry, UTCDateTime
from semantic.store_db import unavailable_on_db_errors

#: When an entry was last used: its last hit, else its last write. The bounds evict the
#: least recently used first (an LRU, as GPTCache's default eviction).
LAST_USED = func.coalesce(SemanticEntry.last_hit_at, SemanticEntry.updated_at, type_=UTCDateTime())


class TenantSize(NamedTuple):
    """A tenant's entries (expired ones too, until purged) and partitions, and whether
    it holds the partition asked about."""

    entries: int
    partitions: int
    has_partition: bool


class SizeQueries:
    """The size reads of :class:`semantic.store.EntryStore` (its ``url`` and sessions)."""

    url: str

    def _session(self) -> Session:
        raise NotImplementedError

    def tenant_size(self, tenant: str, partition_key: str) -> TenantSize:
        statement = select(
            func.count(),
            func.coalesce(func.sum(PartitionSize.entries), 0),
            func.coalesce(func.max(case((PartitionSize.partition_key == partition_key, 1))), 0),
        ).where(PartitionSize.tenant == tenant)
        with unavailable_on_db_errors(self.url), self._session() as session:
            partitions, entries, has = session.execute(statement).one()
        return TenantSize(int(entries), int(partitions), bool(has))

    def partition_sizes(self, tenant: str) -> dict[str, tuple[int, datetime]]:
        """The tenant's partitions: key → (entries, when the partition was last used:
        its latest entry write or hit). A GROUP BY over the tenant's entries: for the
        eviction order only (:meth:`tenant_size` for the counts)."""
        statement = (
            select(
                SemanticEntry.partition_key,
                func.count(),
                func.max(LAST_USED, type_=UTCDateTime()),
            )
            .where(SemanticEntry.tenant == tenant)
            .group_by(SemanticEntry.partition_key)
        )
        with unavailable_on_db_errors(self.url), self._session() as session:
            return {key: (int(n), oldest) for key, n, oldest in session.execute(statement)}

    def oldest_ids(self, tenant: str, limit: int) -> list[int]:
        """Ids of the tenant's ``limit`` least recently used entries (last written or
        hit), those first: an answer served every minute outlives one never asked again,
        whenever each was first stored."""
        statement = (
            select(SemanticEntry.id)
            .where(SemanticEntry.tenant == tenant)
            .order_by(LAST_USED, SemanticEntry.id)
            .limit(limit)
        )
        with unavailable_on_db_errors(self.url), self._session() as session:
            return [int(i) for i in session.scalars(statement)]
