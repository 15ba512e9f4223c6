"""Carrying a partition over from an earlier embedder when its tenant next asks.

A switch of embedder (``CACHEGATE_EMBEDDER``, or new weights under the same name)
changes the embedder id, and the id is part of every partition key
(:mod:`semantic.partition`): the entries the old embedder wrote are no longer
searched. :mod:`semantic.reembed` can move them all at once only for partitions
whose queries a caller recorded, because a key is a one-way hash and a stored row
holds only the hash. A lookup, though, holds the query itself, so it can compute
the key its partition had under each earlier embedder. :class:`PartitionMigrator`
does that: the first lookup of a partition in this process hands the query to a
background thread, which reads the old partition's live entries, embeds their
questions with the current embedder, writes them under the new key and then deletes
the old rows (through the store, so other replicas replay the deletes). The request
that triggered it is not delayed and misses as before; the next one finds the
entries. So a cache survives a switch partition by partition, as its tenants come
back, and two embedders' vectors are never compared: old rows are only ever read
as text and re-embedded.

An entry already present under the new key (a backfill won the race) is kept, not
overwritten with the older answer. Expired entries and questions the new embedder
cannot represent are dropped with the rest. A store outage leaves the old rows in
place and the partition is tried again on a later lookup.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from semantic.cache import SemanticCache
from semantic.errors import StoreUnavailableError
from semantic.partition import SemanticQuery
from semantic.reembed import REEMBED_BATCH
from semantic.store import NewEntry, StoredEntry
from semantic.vectors import check_vectors

log = logging.getLogger("cachegate.semantic.migrate")

#: Partitions remembered as done per process: a forgotten one costs one indexed read
#: per earlier embedder when next asked, nothing else.
DEFAULT_REMEMBERED = 100_000


@dataclass(frozen=True)
class Migrated:
    """What carrying one partition over did; every old row is counted once."""

    source_embedder_id: str
    written: int = 0
    kept: int = 0  # already present under the new key: not overwritten
    expired: int = 0
    unsupported: int = 0  # the current embedder cannot represent the question
    dropped: int = 0  # old rows deleted


#: Asked under the cache's write lock before and after writing (None: always wanted):
#: whether the partition's tenant is still the one that asked. One deleted meanwhile
#: gets nothing written, and what was written as the delete ran is removed again.
StillWanted = Callable[[], bool]


class PartitionMigrator:
    """Moves each partition of ``sources`` (earlier embedder ids) to ``cache``'s
    embedder the first time a lookup of it is seen."""

    def __init__(
        self,
        cache: SemanticCache,
        sources: Iterable[str],
        *,
        remembered: int = DEFAULT_REMEMBERED,
        on_migrated: Callable[[Migrated], None] | None = None,
    ) -> None:
        self.cache = cache
        self.sources = tuple(s for s in dict.fromkeys(sources) if s != cache.embedder_id)
        self.on_migrated = on_migrated
        self._remembered = remembered
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        # One thread: migrations are rare (once per partition) and must not compete
        # with lookups for the embedder.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cachegate-migrate")

    @classmethod
    def for_store(
        cls,
        cache: SemanticCache,
        *,
        on_migrated: Callable[[Migrated], None] | None = None,
    ) -> PartitionMigrator:
        """A migrator over every other embedder id that has rows in ``cache``'s store
        (none: it does nothing, at no cost a lookup)."""
        counts = cache.entries.embedder_counts()
        others = sorted(i for i in counts if i != cache.embedder_id)
        if others:
            log.info(
                "the store holds %d entries of %d earlier embedder(s); each partition is "
                "carried over to %s when its tenant next asks (semantic/migrate.py)",
                sum(counts[i] for i in others),
                len(others),
                cache.embedder_id,
            )
        return cls(cache, others, on_migrated=on_migrated)

    @property
    def is_active(self) -> bool:
        return bool(self.sources)

    def touch(
        self, query: SemanticQuery, partition_key: str, still_wanted: StillWanted | None = None
    ) -> Future[list[Migrated]] | None:
        """Schedule ``query``'s partition (``partition_key`` under the current embedder)
        for migration unless it was seen before; returns the scheduled work, or None."""
        if not self.sources:
            return None
        with self._lock:
            if partition_key in self._seen:
                self._seen.move_to_end(partition_key)
                return None
            self._seen[partition_key] = None
            while len(self._seen) > self._remembered:
                self._seen.popitem(last=False)
        return self._pool.submit(self._run, query, partition_key, still_wanted)

    def _run(
        self, query: SemanticQuery, partition_key: str, still_wanted: StillWanted | None
    ) -> list[Migrated]:
        try:
            return [
                self.migrate(query, partition_key, source, still_wanted) for source in self.sources
            ]
        except StoreUnavailableError as exc:
            with self._lock:  # tried again on a later lookup
                self._seen.pop(partition_key, None)
            log.warning("partition migration postponed: store unavailable (%s)", exc)
            return []
        except Exception:
            log.exception("partition migration failed; the old entries are kept")
            return []

    def migrate(
        self,
        query: SemanticQuery,
        partition_key: str,
        source: str,
        still_wanted: StillWanted | None = None,
    ) -> Migrated:
        """Carry ``query``'s partition over from embedder ``source`` now."""
        cache = self.cache
        old_key = query.partition_key(source)
        ids = cache.entries.ids_in_partition(old_key)
        if not ids:
            return Migrated(source)
        old = sorted(cache.entries.get_many(ids).values(), key=lambda e: e.id)
        now = cache._now()
        live = [e for e in old if not e.is_expired(now)]
        supported = [e for e in live if cache.is_supported(e.question)]
        written: list[int] = []
        kept = 0
        for start in range(0, len(supported), REEMBED_BATCH):
            batch = supported[start : start + REEMBED_BATCH]
            vectors = check_vectors(
                cache.embedder.embed([e.question for e in batch]), cache.embedder.dim
            )
            with cache.write_lock:
                if still_wanted is not None and not still_wanted():
                    break
                for entry, vector in zip(batch, vectors, strict=True):
                    if cache.entries.has_question(partition_key, entry.question):
                        kept += 1
                        continue
                    new = _carried(entry, partition_key, cache.embedder_id, vector)
                    stored, _ = cache.entries.upsert(new, now=now)
                    cache.index.add(partition_key, [stored.id], vector.reshape(1, -1))
                    written.append(stored.id)
        with cache.write_lock:
            if written and still_wanted is not None and not still_wanted():
                # A delete through another replica committed while these were written.
                cache.index.remove(partition_key, written)
                cache.entries.delete(written)
                written = []
            dropped = len(cache.entries.delete([e.id for e in old]))
        done = Migrated(
            source,
            written=len(written),
            kept=kept,
            expired=len(old) - len(live),
            unsupported=len(live) - len(supported),
            dropped=dropped,
        )
        # The key's prefix only: it is a hash, but logs need no more of it.
        log.info(
            "partition %s… carried over from %s: %d written, %d kept, %d expired, "
            "%d unsupported, %d old rows dropped",
            partition_key[:12],
            source,
            done.written,
            done.kept,
            done.expired,
            done.unsupported,
            done.dropped,
        )
        if self.on_migrated is not None:
            self.on_migrated(done)
        return done

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _carried(
    entry: StoredEntry, partition_key: str, embedder_id: str, vector: NDArray[np.float32]
) -> NewEntry:
    """``entry`` as the current embedder's: same answer, entities and expiry; its hit
    count starts afresh, as a re-embedded entry's does (semantic/reembed.py)."""
    return NewEntry(
        partition_key=partition_key,
        tenant=entry.tenant,
        question=entry.question,
        answer=entry.answer,
        embedding=vector,
        embedder_id=embedder_id,
        entities=entry.entities,
        expires_at=entry.expires_at,
        ttl_seconds=entry.ttl_seconds,
    )
