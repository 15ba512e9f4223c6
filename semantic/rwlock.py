"""A readers-writer lock for the vector indexes.

Searches only read a FAISS index (FAISS documents concurrent searches of a CPU
index as safe), so they share the lock; adds, removals and rebuilds take it
alone. With one exclusive lock, a lookup thread holding a partition's lock
through a FAISS search (which releases the GIL) made the event loop's
memory-only lookup find the partition busy and fall back to a thread, which then
held the lock for the next one (README "Speed").

A waiting writer holds new readers back, so a stream of searches cannot starve
an add. The writer may re-enter (a rebuild inside an add) and may read while it
writes; a reader must not ask to write (it would wait for itself: refused).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ReadWriteLock:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers: dict[int, int] = {}  # thread id -> read depth
        self._writer: int | None = None
        self._writer_depth = 0
        self._waiting_writers = 0

    def acquire_read(self, blocking: bool = True) -> bool:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me or me in self._readers:  # re-entry never waits
                self._readers[me] = self._readers.get(me, 0) + 1
                return True
            while self._writer is not None or self._waiting_writers:
                if not blocking:
                    return False
                self._cond.wait()
            self._readers[me] = 1
            return True

    def release_read(self) -> None:
        me = threading.get_ident()
        with self._cond:
            depth = self._readers.get(me, 0)
            if depth < 1:
                raise RuntimeError("release_read without acquire_read")
            if depth == 1:
                del self._readers[me]
                self._cond.notify_all()
            else:
                self._readers[me] = depth - 1

    def acquire_write(self) -> None:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._writer_depth += 1
                return
            if me in self._readers:
                raise RuntimeError("a reader cannot upgrade to writing (it would wait for itself)")
            self._waiting_writers += 1
            try:
                while self._writer is not None or self._readers:
                    self._cond.wait()
            except BaseException:
                # interrupted while waiting: readers held back by this writer may go
                self._waiting_writers -= 1
                self._cond.notify_all()
                raise
            self._waiting_writers -= 1
            self._writer, self._writer_depth = me, 1

    def release_write(self) -> None:
        with self._cond:
            if self._writer != threading.get_ident():
                raise RuntimeError("release_write by a thread that does not hold it")
            self._writer_depth -= 1
            if self._writer_depth == 0:
                self._writer = None
                self._cond.notify_all()

    @contextmanager
    def reading(self, blocking: bool = True) -> Iterator[bool]:
        """Yields whether the lock was taken (always True when ``blocking``)."""
        taken = self.acquire_read(blocking)
        try:
            yield taken
        finally:
            if taken:
                self.release_read()

    @contextmanager
    def writing(self) -> Iterator[None]:
        self.acquire_write()
        try:
            yield
        finally:
            self.release_write()

    def check_integrity(self) -> None:
        """Readers and a writer never both hold it, except the writer reading itself."""
        with self._cond:
            if any(depth < 1 for depth in self._readers.values()):
                raise AssertionError("a reader with depth < 1")
            if self._writer is not None:
                if self._writer_depth < 1:
                    raise AssertionError("a writer with depth < 1")
                if set(self._readers) - {self._writer}:
                    raise AssertionError("other threads read while one writes")
            elif self._writer_depth:
                raise AssertionError("depth without a writer")
