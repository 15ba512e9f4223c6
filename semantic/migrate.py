"""Carrying a partition over from an earlier embedder when its tenant next asks.

A switch of embedder (``CACHEGATE_EMBEDDER``, or new weights under the same name)
changes the embedder id, and the id is part of every partition key
(:mod:`semantic.partition`): the entries the old embedder wrote are no longer
searched. :mod:`semantic.reembed` can move them all at once only for partitions
whose queries a caller recorded, because a key is a one-way hash and a stored row
holds only the hash. A lookup, though, holds the query itself, so it can compute
the key its partition had under each earlier embedder. :class:`PartitionMigrator`
does that: at start it reads which partitions earlier embedders left (their keys
only); a lookup whose partition had one of those keys hands the query to a
background thread, which reads the old rows in batches, embeds their questions with
the current embedder and moves them to the new key (:mod:`semantic.store_move`: one
transaction a batch, logged for the other replicas). The request that found it is
not delayed and misses as before; the next one finds the entries. So a cache
survives a switch partition by partition as its tenants come back, and two
embedders' vectors are never compared: old rows are only ever read as text.

The partitions left are read again every :data:`REFRESH_SECONDS` (in the migration
thread): keys whose rows expired go, and rows an old replica wrote since (a rolling
upgrade) come, every partition then looked at once more. When none is left the
migrator is idle and a lookup pays nothing for it. Migrated rows keep their answer as
it was when moved, their times and their hit count.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from semantic.cache import SemanticCache
from semantic.errors import StoreUnavailableError
from semantic.migrate_partition import Migrated, StillWanted, Stopped, carry_partition
from semantic.partition import SemanticQuery

__all__ = ["Migrated", "PartitionMigrator", "StillWanted"]

log = logging.getLogger("cachegate.semantic.migrate")

#: Partitions remembered as looked at per process: a forgotten one costs one hash per
#: earlier embedder when next asked, nothing else.
DEFAULT_REMEMBERED = 100_000

#: Partitions waiting for the thread at most; one asked beyond that is tried again on a
#: later lookup instead of queueing its query (and conversation) in memory.
MAX_WAITING = 1_000

#: Seconds between re-reads of the partitions left: keys whose rows expired (or that
#: another replica carried) go, and rows an old replica wrote since (a rolling
#: upgrade) come; the migrator goes idle once none is left.
REFRESH_SECONDS = 600.0


class PartitionMigrator:
    """Moves the partitions earlier embedders left (``pending``: embedder id -> their
    partition keys) to ``cache``'s embedder, each when a lookup of it is first seen."""

    def __init__(
        self,
        cache: SemanticCache,
        pending: dict[str, set[str]],
        *,
        remembered: int = DEFAULT_REMEMBERED,
        on_migrated: Callable[[Migrated], None] | None = None,
    ) -> None:
        self.cache = cache
        self._pending = {s: set(k) for s, k in pending.items() if s != cache.embedder_id and k}
        self.on_migrated = on_migrated
        self._remembered = remembered
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._waiting = 0
        self._closing = False
        self._refresh_at = time.monotonic() + REFRESH_SECONDS
        self._refreshing = False
        self._lock = threading.Lock()
        # One thread: migrations are rare (once per partition) and must not compete
        # with lookups for the embedder.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cachegate-migrate")

    @classmethod
    def for_store(
        cls, cache: SemanticCache, *, on_migrated: Callable[[Migrated], None] | None = None
    ) -> PartitionMigrator:
        """A migrator over every live partition other embedders left in ``cache``'s
        store (none: it does nothing, at no cost a lookup)."""
        pending = cache.entries.partitions_by_embedder(cache.now(), cache.embedder_id)
        if pending:
            log.info(
                "the store holds %d partition(s) of %d earlier embedder(s); each is "
                "carried over to %s when its tenant next asks (semantic/migrate.py)",
                sum(len(k) for k in pending.values()),
                len(pending),
                cache.embedder_id,
            )
        return cls(cache, pending, on_migrated=on_migrated)

    @property
    def sources(self) -> tuple[str, ...]:
        """The earlier embedder ids with partitions still to carry."""
        with self._lock:
            return tuple(sorted(s for s, keys in self._pending.items() if keys))

    @property
    def is_active(self) -> bool:
        return bool(self._pending)

    def touch(
        self, query: SemanticQuery, partition_key: str, still_wanted: StillWanted | None = None
    ) -> Future[list[Migrated]] | None:
        """Schedule ``query``'s partition (``partition_key`` under the current embedder)
        when an earlier embedder left one for it and it was not looked at before;
        returns the scheduled work, or None."""
        if not self._pending or self._closing:
            return None
        self._refresh_if_due()
        with self._lock:
            if partition_key in self._seen:
                self._seen.move_to_end(partition_key)
                return None
            self._seen[partition_key] = None
            while len(self._seen) > self._remembered:
                self._seen.popitem(last=False)
            sources = list(self._pending)
        # Hashed outside the lock: the key covers the whole conversation.
        keys = {source: query.partition_key(source) for source in sources}
        with self._lock:
            left = {s: k for s, k in keys.items() if k in self._pending.get(s, ())}
            if not left:
                return None
            if self._waiting >= MAX_WAITING:
                self._seen.pop(partition_key, None)  # asked again later
                return None
            self._waiting += 1
        return self._submit(self._run, partition_key, left, still_wanted)

    def _submit(
        self, fn: Callable[..., list[Migrated]], *args: object
    ) -> Future[list[Migrated]] | None:
        try:
            return self._pool.submit(fn, *args)
        except RuntimeError:  # closed meanwhile
            return None

    def _refresh_if_due(self) -> None:
        with self._lock:
            if self._refreshing or time.monotonic() < self._refresh_at:
                return
            self._refreshing = True
        self._submit(self._refresh)

    def _refresh(self) -> list[Migrated]:
        """Re-read the partitions left (in the migration thread, off the request path);
        every partition may be looked at again, once."""
        try:
            cache = self.cache
            pending = cache.entries.partitions_by_embedder(cache.now(), cache.embedder_id)
            with self._lock:
                self._pending = pending
                self._seen.clear()
        except StoreUnavailableError as exc:
            log.warning("could not re-read the partitions left to carry over: %s", exc)
        finally:
            with self._lock:
                self._refreshing = False
                self._refresh_at = time.monotonic() + REFRESH_SECONDS
        return []

    def _run(
        self, partition_key: str, left: dict[str, str], still_wanted: StillWanted | None
    ) -> list[Migrated]:
        with self._lock:
            self._waiting -= 1
        done: list[Migrated] = []
        settled = list(left.items())  # dropped from the pending keys at the end
        try:
            for source, old_key in left.items():
                done.append(self.migrate(partition_key, source, old_key, still_wanted))
        except Stopped as stop:
            if not stop.gone:
                settled = []  # closing: carried after the next start
        except StoreUnavailableError as exc:
            settled = []
            with self._lock:  # tried again on a later lookup
                self._seen.pop(partition_key, None)
            log.warning("partition migration postponed: store unavailable (%s)", exc)
        except Exception:
            # Not tried again in this process (it would fail alike on every lookup):
            # the rows not yet moved stay, unsearched, until they expire.
            log.exception("partition migration failed; the rows not yet moved are kept")
        with self._lock:
            for source, old_key in settled:
                keys = self._pending.get(source)
                if keys is not None:
                    keys.discard(old_key)
                    if not keys:
                        del self._pending[source]
        for moved in done:
            if self.on_migrated is not None:
                try:
                    self.on_migrated(moved)
                except Exception:
                    log.exception("on_migrated failed")
        return done

    def migrate(
        self,
        partition_key: str,
        source: str,
        old_key: str,
        still_wanted: StillWanted | None = None,
    ) -> Migrated:
        """Carry the partition ``old_key`` of embedder ``source`` over to
        ``partition_key`` now (:func:`semantic.migrate_partition.carry_partition`)."""
        return carry_partition(
            self.cache, partition_key, source, old_key, still_wanted, lambda: self._closing
        )

    def close(self) -> None:
        """Stop after the batch in hand (the rest is carried after the next start)."""
        self._closing = True
        self._pool.shutdown(wait=True, cancel_futures=True)
