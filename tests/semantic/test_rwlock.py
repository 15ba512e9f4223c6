"""The indexes' readers-writer lock: shared reads, exclusive writes, no starved writer,
non-blocking reads, and re-entry (a reader re-enters, the writer re-enters and reads).

Every thread here is a daemon joined with a timeout, and every wait has a timeout,
so a broken lock fails these tests rather than hanging them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from semantic.rwlock import ReadWriteLock
from tests.semantic.rwlock_support import TIMEOUT, Holder, Worker, run, try_read_elsewhere


def wait_until(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the condition"
        time.sleep(0.001)


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
