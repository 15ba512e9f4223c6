"""The readers-writer lock refuses misuse and keeps its invariants: a reader cannot
upgrade, every release needs its acquire, and ``check_integrity`` holds through a mix
of readers and writers and detects a corrupted state.

Every thread here is a daemon joined with a timeout, and every wait has a timeout,
so a broken lock fails these tests rather than hanging them.
"""

from __future__ import annotations

import functools
import threading

import pytest

from semantic.rwlock import ReadWriteLock
from tests.semantic.rwlock_support import TIMEOUT, Worker, run, try_read_elsewhere


@pytest.fixture
def lock() -> ReadWriteLock:
    return ReadWriteLock()


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
