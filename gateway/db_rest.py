"""Bounds on the request path's waits for a database that hangs instead of refusing.

A database that refuses connections fails fast, and every caller falls back (keys
confirmed lately work from memory, the semantic layer is skipped). One that *hangs*
(a stalled link, a frozen primary, a connection pool whose pre-ping never returns)
does not fail at all: statement and lock timeouts are enforced by the server, which
never hears of them, and TCP keepalives are answered by any live kernel in between.
So the request path bounds its own wait (:func:`within`): past the deadline it stops
waiting, the call's thread runs on until the database answers or its socket breaks
(a database call cannot be interrupted), and the caller rests (:class:`DbRest`) so
that requests behind it do not each pay the deadline, or queue behind hung threads.

Those calls run on a pool of their own, not the event loop's default one: hung threads
there had held every default thread, and requests that need no database at all (the
engine's tokenizer) waited behind them. A full pool here makes the next call wait its
deadline, then count as a failure: bounded, like the rest. /ready's pings go through
:class:`Probe`, one at a time, so health checks every second cannot pile up threads.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds after a failure in which the database is not asked again (the first call
#: after the rest tries; the others rest on until it is answered).
RETRY_SECONDS = 5.0
MAX_RETRY_SECONDS = 30.0  # the longest rest while failures go on (see DbRest)


def backoff(base: float, failures: int) -> float:
    """The rest after ``failures`` in a row: ``base``, doubled with each more, at most
    ``MAX_RETRY_SECONDS``."""
    return float(min(base * 2 ** min(max(failures - 1, 0), 8), MAX_RETRY_SECONDS))


class DbDeadlineError(TimeoutError):
    """The database did not answer within the request path's deadline."""


DB_THREADS = 16
_POOL = ThreadPoolExecutor(max_workers=DB_THREADS, thread_name_prefix="cachegate-db")


def _in_pool(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    context = contextvars.copy_context()  # as to_thread: trace spans go along
    return asyncio.get_running_loop().run_in_executor(pool, partial(context.run, fn, *args))


async def within(
    seconds: float, fn: Callable[..., T], *args: Any, pool: ThreadPoolExecutor = _POOL
) -> T:
    """``fn(*args)`` on a database thread (of ``pool``), waited for at most ``seconds``
    (the time waiting for a free thread included)."""
    try:
        return await asyncio.wait_for(_in_pool(pool, fn, *args), seconds)
    except TimeoutError:
        raise DbDeadlineError(f"the database did not answer within {seconds:g} s") from None


class Probe:
    """A health ping shared by concurrent checks: a check that arrives while a ping is
    out waits for that same ping (within its own deadline) instead of starting another;
    only once the ping out is older than the deadline (a database that hangs holds its
    thread) does the next check say "no" at once, so checks every second against a
    hung database cannot pile up threads."""

    def __init__(self) -> None:
        self._pending: asyncio.Future[Any] | None = None
        self._started = 0.0

    async def run(self, seconds: float, fn: Callable[..., T], *args: Any) -> T:
        now = asyncio.get_running_loop().time()
        future = self._pending
        if future is None or future.done():
            self._pending = future = _in_pool(_POOL, fn, *args)
            self._started = now
            # Read whatever it ends with, so a ping given up on logs no "never retrieved".
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
        elif now - self._started >= seconds:
            raise DbDeadlineError("an earlier ping of the database has not come back")
        try:
            # shielded: a ping given up on stays pending until its thread returns
            result: T = await asyncio.wait_for(asyncio.shield(future), seconds)
        except TimeoutError:
            raise DbDeadlineError(f"the database did not answer within {seconds:g} s") from None
        return result


class DbRest:
    """Whether a database is resting after a failure; thread-safe enough for flags
    (a race lets one more call through, never none).

    The rest doubles while failures go on (``RETRY_SECONDS`` up to ``MAX_RETRY_SECONDS``):
    in a long outage the one call each rest lets through pays the deadline, and calls
    spaced wider than a fixed rest would each pay it. A success (a call, or /ready's
    ping) ends the rest at once."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._retry_at = 0.0
        self._failures = 0  # in a row
        self.is_ok = True

    def is_resting(self) -> bool:
        return not self.is_ok and self.clock() < self._retry_at

    def take_turn(self) -> bool:
        """True for the call that may ask the database: any while it is well, one per
        rest after a failure (the rest is renewed for the others meanwhile)."""
        if self.is_ok:
            return True
        now = self.clock()
        if now < self._retry_at:
            return False
        self._retry_at = now + self._rest()
        return True

    def failed(self) -> None:
        self.is_ok = False
        self._failures += 1
        self._retry_at = self.clock() + self._rest()

    def succeeded(self) -> None:
        self.is_ok = True
        self._failures = 0

    def _rest(self) -> float:
        return backoff(RETRY_SECONDS, self._failures)
