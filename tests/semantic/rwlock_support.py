"""Helpers of the readers-writer lock tests: daemon threads joined with a timeout and
a thread that holds the lock until told, so a broken lock fails a test rather than
hanging it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

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
