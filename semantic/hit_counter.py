"""Hit counts written in batches, off the request path.

Counting a hit used to be one write transaction per served answer: on SQLite
every hit then queued for the database's single writer lock, which at 32
concurrent clients cost more than the rest of the hit. :class:`HitCounter`
collects hits in memory (entry id → count, last hit time, latest slid expiry)
and a background thread writes them every ``interval`` seconds in one
transaction (:meth:`~semantic.store.EntryStore.record_hits`).

Guarantees:

* a request never waits for, nor fails because of, the count: :meth:`record`
  only takes a lock and updates a dict;
* a failed flush (database down) keeps the pending counts and retries at the
  next interval, merged with the hits counted meanwhile; it is logged, never
  raised into a request;
* :meth:`flush` writes everything pending now (readers that must see exact
  counts call it first: :meth:`semantic.cache.SemanticCache.get_entry`), and
  :meth:`close` stops the thread after a last flush (also run at interpreter exit).

What it costs: another reader of the database sees a count up to ``interval``
seconds late, and a crash loses at most that much counting. A hit that slides the
entry's expiry (a policy with ``sliding_ttl``) is not deferred: the cache writes
it at once, or a lookup in between could find the entry expired by its old expiry.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from semantic.errors import StoreUnavailableError

logger = logging.getLogger(__name__)

#: Seconds between background flushes.
DEFAULT_FLUSH_SECONDS = 0.5


@dataclass
class PendingHits:
    """Hits on one entry not yet written."""

    count: int
    last_hit_at: datetime
    expires_at: datetime | None  # the latest slid expiry, or None to leave it

    def merge(self, other: PendingHits) -> None:
        self.count += other.count
        self.last_hit_at = max(self.last_hit_at, other.last_hit_at)
        if other.expires_at is not None:
            self.expires_at = (
                other.expires_at
                if self.expires_at is None
                else max(self.expires_at, other.expires_at)
            )


class HitSink(Protocol):
    """What the counter writes to (``EntryStore``)."""

    def record_hits(self, hits: dict[int, PendingHits]) -> None: ...


class HitCounter:
    """Counts hits in memory; a daemon thread writes them every ``interval`` seconds."""

    def __init__(self, sink: HitSink, interval: float = DEFAULT_FLUSH_SECONDS) -> None:
        if interval <= 0:
            raise ValueError("interval must be > 0")
        self.sink = sink
        self.interval = interval
        self._pending: dict[int, PendingHits] = {}
        self._in_flight: dict[int, PendingHits] = {}  # the batch a flush is writing
        self._lock = threading.Lock()  # guards _pending
        self._flush_lock = threading.Lock()  # one flush at a time, in id order of arrival
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.failures = 0  # flushes that found the database unavailable
        # Bound weakly: a counter nobody holds any more is not kept alive by atexit.
        atexit.register(_close_at_exit, weakref.ref(self))

    def record(self, entry_id: int, *, at: datetime, expires_at: datetime | None = None) -> None:
        """Count one hit on ``entry_id``; never touches the database."""
        hit = PendingHits(1, at, expires_at)
        with self._lock:
            pending = self._pending.get(entry_id)
            if pending is None:
                self._pending[entry_id] = hit
            else:
                pending.merge(hit)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="semantic-hit-counter", daemon=True
                )
                self._thread.start()

    def pending(self) -> int:
        """Entries with hits not yet written (those a flush is writing now included:
        they read as written while a write that may fail was out)."""
        with self._lock:
            return len(self._pending.keys() | self._in_flight.keys())

    def flush(self) -> bool:
        """Write every pending hit now. Returns False (and keeps them for the next
        try) when the write fails (before session 44, for anything but an outage the
        batch was lost); never raises for that."""
        with self._flush_lock:
            with self._lock:
                batch, self._pending = self._pending, {}
                self._in_flight = batch
            if not batch:
                return True
            try:
                self.sink.record_hits(batch)
            except Exception as exc:  # kept for the next try, whatever failed the write
                self.failures += 1
                why = exc if isinstance(exc, StoreUnavailableError) else type(exc).__name__
                logger.warning(
                    "semantic: could not write %d entries' hit counts (will retry): %s",
                    len(batch),
                    why,
                )
                with self._lock:
                    # Hits counted meanwhile merge into the batch that failed.
                    for entry_id, newer in self._pending.items():
                        if entry_id in batch:
                            batch[entry_id].merge(newer)
                        else:
                            batch[entry_id] = newer
                    self._pending, self._in_flight = batch, {}
                return False
            finally:
                with self._lock:
                    self._in_flight = {}
            return True

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self.interval)
            try:
                self.flush()
            except Exception:  # a bug in the sink: log it, keep the thread (and requests) alive
                logger.exception("semantic: hit-count flush failed")

    def close(self) -> None:
        """Stop the background thread after a last flush (idempotent)."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5 * self.interval + 5)
        try:
            self.flush()
        except Exception:
            logger.exception("semantic: last hit-count flush failed")


def _close_at_exit(ref: weakref.ReferenceType[HitCounter]) -> None:
    counter = ref()
    if counter is not None:
        counter.close()
