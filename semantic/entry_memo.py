"""Rows the hit path read recently, so a repeated hit does not read its row again.

A cached FAQ is served hundreds of times a second; reading its row each time was
the largest share of a hit's CPU (an SQLAlchemy statement and a row decoded into a
:class:`~semantic.store.StoredEntry`: 19% of the server's samples at 400 hits/s,
README "Speed"). The memo keeps decoded rows by id, LRU, and the store keeps it
exact:

- every write through :class:`~semantic.store.EntryStore` (upsert, delete, a slid
  expiry) forgets the rows it touched *after* its commit, and a read that raced a
  write cannot put the row it read: :meth:`put` takes the :meth:`generation` seen
  before the read and is dropped if anything was forgotten since;
- another replica's writes reach this one through the change log, whose replay
  forgets the rows (``semantic.replay``), as it updates the index, and keeps again
  the ones it forgot with the rows it has just read (the replay of this replica's
  own write among them: it must not leave a hot row out of memory);
- a row is trusted for at most ``max_age`` seconds, a bound on staleness if the
  change feed stalls, and a row expired by its stored expiry is never returned
  (it is read again: another replica may have slid it).

A kept :class:`~semantic.store.StoredEntry` is handed to every lookup that reads it:
its ``answer`` is shared between requests and must be treated as read-only (the
gateway only reads it to build each response).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semantic.store import StoredEntry

#: Rows kept (a decoded row is ~2 KB with its 384-float embedding: 4,096 ≈ 8 MiB).
DEFAULT_MEMO_SIZE = 4096
#: Seconds a row is trusted without being read again.
DEFAULT_MEMO_SECONDS = 10.0


class EntryMemo:
    """Decoded rows by id, bounded in count and age; safe to share between threads."""

    def __init__(
        self,
        size: int = DEFAULT_MEMO_SIZE,
        max_age: float = DEFAULT_MEMO_SECONDS,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        if max_age < 0:
            raise ValueError("max_age must be >= 0")
        self.size = size
        self.max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._rows: OrderedDict[int, tuple[float, StoredEntry]] = OrderedDict()
        self._generation = 0

    @property
    def is_enabled(self) -> bool:
        return self.size > 0 and self.max_age > 0

    def __len__(self) -> int:
        return len(self._rows)

    def generation(self) -> int:
        """Take before reading rows from the database; hand to :meth:`put`."""
        return self._generation

    def get(self, ids: Iterable[int], now: datetime) -> tuple[dict[int, StoredEntry], list[int]]:
        """``(found, missing)``: the rows known and fresh, and the ids to read."""
        found: dict[int, StoredEntry] = {}
        missing: list[int] = []
        oldest = self._clock() - self.max_age
        with self._lock:
            for entry_id in ids:
                kept = self._rows.get(entry_id)
                if kept is None or kept[0] < oldest or kept[1].is_expired(now):
                    missing.append(entry_id)
                    continue
                self._rows.move_to_end(entry_id)
                found[entry_id] = kept[1]
        return found, missing

    def put(self, rows: Iterable[StoredEntry], generation: int) -> bool:
        """Keep ``rows`` unless a row was forgotten since ``generation`` (they may be older
        than that write); returns whether they were kept."""
        if not self.is_enabled:
            return False
        at = self._clock()
        with self._lock:
            if generation != self._generation:
                return False
            for row in rows:
                self._rows[row.id] = (at, row)
                self._rows.move_to_end(row.id)
            while len(self._rows) > self.size:
                self._rows.popitem(last=False)
        return True

    def forget(self, ids: Iterable[int]) -> list[int]:
        """Call after committing a write of these rows (or replaying another replica's);
        returns the ids that were kept, so a replay that reads them again can keep them
        again (:mod:`semantic.replay`)."""
        dropped: list[int] = []
        with self._lock:
            self._generation += 1
            for entry_id in ids:
                if self._rows.pop(entry_id, None) is not None:
                    dropped.append(entry_id)
        return dropped

    def forget_partition(self, partition_key: str) -> None:
        with self._lock:
            self._generation += 1
            doomed = [i for i, (_, row) in self._rows.items() if row.partition_key == partition_key]
            for entry_id in doomed:
                del self._rows[entry_id]

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._rows.clear()

    def check_integrity(self) -> None:
        """Every key maps to its own row; the bound holds; times never run ahead."""
        with self._lock:
            if len(self._rows) > self.size:
                raise AssertionError(f"{len(self._rows)} rows kept, bound {self.size}")
            now = self._clock()
            for entry_id, (at, row) in self._rows.items():
                if row.id != entry_id:
                    raise AssertionError(f"key {entry_id} holds row {row.id}")
                if at > now:
                    raise AssertionError(f"row {entry_id} kept in the future")
