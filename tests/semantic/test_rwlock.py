"""The indexes' readers-writer lock: shared reads, exclusive writes, no starved writer.

Every thread here is a daemon joined with a timeout, and every wait has a timeout,
so a broken lock fails these tests rather than hanging them.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from semantic.errors import WouldBlockError
from semantic.index import VectorIndex
from semantic.rwlock import ReadWriteLock

TIMEOUT = 5.0  # how long a thread may take to do what it should do at once
BLOCKED = 0.05  # how long a thread that should be blocked is watched


class Worker(threading.Thread):
    """Runs ``fn`` in a daemon thread; :meth:`finish` joins it and re-raises its error."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # re-raised by finish()
            self.error = exc

    def finish(self) -> Any:
        self.join(TIMEOUT)
        assert not self.is_alive(), "the thread is still blocked"
        if self.error is not None:
            raise self.error
        return self.result


def run(fn: Callable[[], Any]) -> Any:
    """``fn()`` in another thread (so a lock that wrongly blocks fails, not hangs)."""
    worker = Worker(fn)
    worker.start()
    return worker.finish()


def wait_until(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the condition"
        time.sleep(0.001)


def try_read_elsewhere(lock: ReadWriteLock) -> bool:
    """Whether another thread can take the lock to read without waiting."""

    def attempt() -> bool:
        taken = lock.acquire_read(blocking=False)
        if taken:
            lock.release_read()
        return taken

    return bool(run(attempt))


class Holder:
    """A thread that takes the lock (to read or write), says so, and holds it until told."""

    def __init__(self, lock: ReadWriteLock, mode: str, log: list[str] | None = None) -> None:
        self.lock = lock
        self.mode = mode
        self.log = log
        self.inside = threading.Event()
        self.leave = threading.Event()
        self.worker = Worker(self._body)
        self.worker.start()

    def _body(self) -> None:
        with self.lock.writing() if self.mode == "write" else self.lock.reading():
            self.lock.check_integrity()
            self.inside.set()
            if self.log is not None:
                self.log.append(f"{self.mode} in")
            assert self.leave.wait(TIMEOUT), "never told to leave"
            if self.log is not None:
                self.log.append(f"{self.mode} out")

    def wait_inside(self) -> None:
        assert self.inside.wait(TIMEOUT), f"the {self.mode}r never got the lock"

    def assert_blocked(self) -> None:
        assert not self.inside.wait(BLOCKED), f"the {self.mode}r got the lock"

    def release(self) -> None:
        self.leave.set()
        self.worker.finish()


@pytest.fixture
def lock() -> ReadWriteLock:
    return ReadWriteLock()


@pytest.fixture
def holders(lock: ReadWriteLock) -> Iterator[Callable[..., Holder]]:
    """Makes :class:`Holder` threads and lets every one go at teardown (even on failure)."""
    made: list[Holder] = []

    def make(mode: str, log: list[str] | None = None) -> Holder:
        holder = Holder(lock, mode, log)
        made.append(holder)
        return holder

    yield make
    for holder in made:
        holder.leave.set()
    for holder in made:
        holder.worker.join(TIMEOUT)


def writer_waiting(lock: ReadWriteLock, count: int = 1) -> Callable[[], bool]:
    return lambda: lock._waiting_writers == count


# -- readers share -----------------------------------------------------------------------


def test_two_readers_are_inside_at_once(lock: ReadWriteLock) -> None:
    both_inside = threading.Barrier(2, timeout=TIMEOUT)

    def read() -> None:
        with lock.reading() as taken:
            assert taken is True
            both_inside.wait()  # broken (and raises) unless the other reader is inside too
            lock.check_integrity()

    readers = [Worker(read) for _ in range(2)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.finish()
    lock.check_integrity()


def test_a_reader_does_not_block_a_non_blocking_reader(
    lock: ReadWriteLock, holders: Callable[..., Holder]
) -> None:
    reader = holders("read")
    reader.wait_inside()
    assert try_read_elsewhere(lock) is True
    with lock.reading(blocking=False) as taken:
        assert taken is True
        lock.check_integrity()
    reader.release()
    lock.check_integrity()


# -- a writer is exclusive ---------------------------------------------------------------


def test_a_writer_waits_for_every_reader_to_leave(
    lock: ReadWriteLock, holders: Callable[..., Holder]
) -> None:
    first, second = holders("read"), holders("read")
    first.wait_inside()
    second.wait_inside()
    writer = holders("write")
    wait_until(writer_waiting(lock))
    writer.assert_blocked()
    lock.check_integrity()
    first.release()
    writer.assert_blocked()  # one reader is still inside
    lock.check_integrity()
    second.release()
    writer.wait_inside()
    lock.check_integrity()
    writer.release()
    assert lock._waiting_writers == 0
    lock.check_integrity()


def test_a_reader_waits_for_the_writer_to_leave(
    lock: ReadWriteLock, holders: Callable[..., Holder]
) -> None:
    writer = holders("write")
    writer.wait_inside()
    reader = holders("read")
    reader.assert_blocked()
    lock.check_integrity()
    writer.release()
    reader.wait_inside()
    lock.check_integrity()
    reader.release()


def test_a_writer_waits_for_another_writer(
    lock: ReadWriteLock, holders: Callable[..., Holder]
) -> None:
    first = holders("write")
    first.wait_inside()
    second = holders("write")
    wait_until(writer_waiting(lock))
    second.assert_blocked()
    lock.check_integrity()
    first.release()
    second.wait_inside()
    lock.check_integrity()
    second.release()
    lock.check_integrity()


def test_a_waiting_writer_holds_new_readers_back(
    lock: ReadWriteLock, holders: Callable[..., Holder]
) -> None:
    log: list[str] = []
    early = holders("read", log)
    early.wait_inside()
    writer = holders("write", log)
    wait_until(writer_waiting(lock))
    late = holders("read", log)  # arrives while the writer waits: must queue behind it
    late.assert_blocked()
    lock.check_integrity()
    early.release()
    writer.wait_inside()
    late.assert_blocked()  # the writer is inside now
    lock.check_integrity()
    writer.release()
    late.wait_inside()
    late.release()
    assert log == ["read in", "read out", "write in", "write out", "read in", "read out"]
    lock.check_integrity()


# -- non-blocking reads ------------------------------------------------------------------


def test_a_non_blocking_read_fails_while_a_writer_holds_it(
    lock: ReadWriteLock, holders: Callable[..., Holder]
) -> None:
    writer = holders("write")
    writer.wait_inside()
    assert lock.acquire_read(blocking=False) is False
    with lock.reading(blocking=False) as taken:  # leaving must not release what it never took
        assert taken is False
        lock.check_integrity()
    with pytest.raises(RuntimeError):  # nothing was taken by this thread
        lock.release_read()
    lock.check_integrity()
    writer.release()
    assert lock.acquire_read(blocking=False) is True
    lock.release_read()
    lock.check_integrity()


def test_a_non_blocking_read_fails_while_a_writer_waits(
    lock: ReadWriteLock, holders: Callable[..., Holder]
) -> None:
    reader = holders("read")
    reader.wait_inside()
    assert try_read_elsewhere(lock) is True  # a reader alone does not stop it
    writer = holders("write")
    wait_until(writer_waiting(lock))
    assert lock.acquire_read(blocking=False) is False
    with lock.reading(blocking=False) as taken:
        assert taken is False
    lock.check_integrity()
    reader.release()
    writer.wait_inside()
    assert lock.acquire_read(blocking=False) is False
    writer.release()
    assert try_read_elsewhere(lock) is True
    lock.check_integrity()


def test_a_reader_re_enters_while_a_writer_waits(
    lock: ReadWriteLock, holders: Callable[..., Holder]
) -> None:
    outer_inside, writer_queued = threading.Event(), threading.Event()

    def reader() -> tuple[bool, bool]:
        with lock.reading():
            outer_inside.set()
            assert writer_queued.wait(TIMEOUT)
            # Waiting here for the writer, which waits for this thread, would deadlock.
            with lock.reading() as again, lock.reading(blocking=False) as once_more:
                lock.check_integrity()
                return again, once_more

    worker = Worker(reader)
    worker.start()
    assert outer_inside.wait(TIMEOUT)
    writer = holders("write")
    wait_until(writer_waiting(lock))
    writer_queued.set()
    assert worker.finish() == (True, True)
    writer.wait_inside()  # the reader left entirely: every level was released
    writer.release()
    lock.check_integrity()


# -- the writer re-enters and reads ------------------------------------------------------


def test_the_writer_re_enters_and_reads(lock: ReadWriteLock) -> None:
    def write() -> list[bool]:
        seen: list[bool] = []
        with lock.writing():
            with lock.writing():
                with lock.reading() as taken, lock.reading(blocking=False) as taken_again:
                    assert taken is True and taken_again is True
                    lock.check_integrity()
                    seen.append(try_read_elsewhere(lock))
                lock.check_integrity()
                seen.append(try_read_elsewhere(lock))
            # One level of writing left: still exclusive.
            lock.check_integrity()
            seen.append(try_read_elsewhere(lock))
        lock.check_integrity()
        seen.append(try_read_elsewhere(lock))
        return seen

    assert run(write) == [False, False, False, True]
    assert lock._writer is None and lock._writer_depth == 0 and lock._readers == {}


def test_the_writer_reading_then_releasing_the_write_is_a_plain_reader(
    lock: ReadWriteLock, holders: Callable[..., Holder]
) -> None:
    stopped_writing, done = threading.Event(), threading.Event()

    def downgrade() -> None:
        lock.acquire_write()
        lock.acquire_read()
        lock.release_write()
        lock.check_integrity()
        stopped_writing.set()
        assert done.wait(TIMEOUT)
        lock.release_read()

    worker = Worker(downgrade)
    worker.start()
    assert stopped_writing.wait(TIMEOUT)
    assert try_read_elsewhere(lock) is True  # readers share with it now
    writer = holders("write")
    wait_until(writer_waiting(lock))
    writer.assert_blocked()  # it still reads
    lock.check_integrity()
    done.set()
    worker.finish()
    writer.wait_inside()
    writer.release()
    lock.check_integrity()


# -- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1, 2])
def test_a_reader_cannot_upgrade(lock: ReadWriteLock, depth: int) -> None:
    def upgrade() -> None:
        for _ in range(depth):
            lock.acquire_read()
        try:
            with pytest.raises(RuntimeError, match="cannot upgrade"):
                lock.acquire_write()
            lock.check_integrity()
            assert lock._waiting_writers == 0
            assert lock._writer is None
        finally:
            for _ in range(depth):
                lock.release_read()

    run(upgrade)  # refused at once, not a thread that waits for itself
    # The refusal left nothing behind: readers are not held back by a phantom writer.
    assert try_read_elsewhere(lock) is True

    def write() -> None:
        with lock.writing():
            lock.check_integrity()

    run(write)  # and the lock can still be written
    lock.check_integrity()


def test_release_without_acquire_raises(lock: ReadWriteLock) -> None:
    with pytest.raises(RuntimeError, match="release_read without acquire_read"):
        lock.release_read()
    with pytest.raises(RuntimeError, match="does not hold it"):
        lock.release_write()
    lock.check_integrity()

    lock.acquire_read()
    with pytest.raises(RuntimeError, match="does not hold it"):
        lock.release_write()  # reading is not writing
    lock.release_read()
    with pytest.raises(RuntimeError):
        lock.release_read()  # one acquire, one release
    lock.check_integrity()

    with lock.writing():
        with pytest.raises(RuntimeError, match="does not hold it"):
            run(lock.release_write)  # another thread cannot release this one's write
        with pytest.raises(RuntimeError):
            run(lock.release_read)
        lock.check_integrity()
    with pytest.raises(RuntimeError):
        lock.release_write()  # one acquire, one release
    assert lock._writer is None and lock._readers == {}
    assert try_read_elsewhere(lock) is True
    lock.check_integrity()


# -- integrity ---------------------------------------------------------------------------


def test_integrity_holds_through_a_mix_of_readers_and_writers(lock: ReadWriteLock) -> None:
    guard = threading.Lock()
    active = {"read": 0, "write": 0}
    counts = {"read": 0, "write": 0, "refused": 0}
    start = threading.Barrier(6, timeout=TIMEOUT)

    def enter(mode: str) -> None:
        with guard:
            active[mode] += 1
            counts[mode] += 1
            if mode == "write":
                assert active == {"read": 0, "write": 1}, active
            else:
                assert active["write"] == 0, active

    def leave(mode: str) -> None:
        with guard:
            active[mode] -= 1

    def reader(n: int) -> None:
        start.wait()
        for i in range(200):
            with lock.reading(blocking=(i + n) % 3 != 0) as taken:
                if not taken:
                    with guard:
                        counts["refused"] += 1
                    continue
                enter("read")
                lock.check_integrity()
                leave("read")

    def writer() -> None:
        start.wait()
        for i in range(100):
            with lock.writing():
                enter("write")
                lock.check_integrity()
                if i % 10 == 0:
                    with lock.writing(), lock.reading():
                        lock.check_integrity()
                leave("write")

    workers = [Worker(functools.partial(reader, n)) for n in range(4)]
    workers += [Worker(writer) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.finish()
    assert counts["write"] == 200
    assert counts["read"] + counts["refused"] == 800
    assert active == {"read": 0, "write": 0}
    assert lock._readers == {} and lock._writer is None and lock._waiting_writers == 0
    lock.check_integrity()


def test_integrity_detects_a_reader_beside_the_writer(lock: ReadWriteLock) -> None:
    with lock.writing():
        lock.check_integrity()
        lock._readers[-1] = 1  # a thread id that is not the writer's
        with pytest.raises(AssertionError, match="other threads read while one writes"):
            lock.check_integrity()
        del lock._readers[-1]
        lock.check_integrity()


def test_integrity_detects_bad_depths(lock: ReadWriteLock) -> None:
    lock._readers[-1] = 0
    with pytest.raises(AssertionError, match="a reader with depth < 1"):
        lock.check_integrity()
    lock._readers.clear()
    lock._writer_depth = 1
    with pytest.raises(AssertionError, match="depth without a writer"):
        lock.check_integrity()
    lock._writer, lock._writer_depth = threading.get_ident(), 0
    with pytest.raises(AssertionError, match="a writer with depth < 1"):
        lock.check_integrity()


# -- the vector index's searches share its lock --------------------------------------------


def test_index_searches_share_the_lock_and_never_wait_for_a_change() -> None:
    dim = 16
    rng = np.random.default_rng(11)
    vecs = rng.standard_normal((8, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    index = VectorIndex(dim, use_gpu=False)
    index.add(np.arange(100, 108), vecs)
    lock = index._lock

    # Another thread is changing the index: a memory-only lookup does not wait.
    writer = Holder(lock, "write")
    try:
        writer.wait_inside()
        with pytest.raises(WouldBlockError) as raised:
            index.search(vecs[3], k=2, blocking=False)
        assert raised.value.reason == "index_busy"
        with pytest.raises(WouldBlockError):
            index.live_count(blocking=False)
    finally:
        writer.release()

    # Another thread is searching (holds it to read): the search runs beside it.
    reader = Holder(lock, "read")
    try:
        reader.wait_inside()
        best = index.search(vecs[3], k=2, blocking=False)
        cosines = vecs @ vecs[3]
        expected = [(100 + int(i), float(cosines[i])) for i in np.argsort(-cosines)[:2]]
        assert [entry_id for entry_id, _ in best] == [103, expected[1][0]]
        assert [score for _, score in best] == pytest.approx([1.0, expected[1][1]], abs=1e-5)
        assert index.live_count(blocking=False) == 8
        assert run(lambda: index.search(vecs[6], k=1, blocking=False))[0][0] == 106
        lock.check_integrity()
    finally:
        reader.release()

    # And a blocking search waits for the change instead of raising.
    writer = Holder(lock, "write")
    try:
        writer.wait_inside()
        searching = Worker(lambda: index.search(vecs[5], k=1))
        searching.start()
        searching.join(BLOCKED)
        assert searching.is_alive()  # waiting for the writer
    finally:
        writer.release()
    assert searching.finish()[0][0] == 105
    lock.check_integrity()
