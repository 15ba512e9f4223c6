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
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds after a failure in which the database is not asked again (the first call
#: after the rest tries; the others rest on until it is answered).
RETRY_SECONDS = 5.0


class DbDeadlineError(TimeoutError):
    """The database did not answer within the request path's deadline."""


async def within(seconds: float, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a thread, waited for at most ``seconds``."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(fn, *args), seconds)
    except TimeoutError:
        raise DbDeadlineError(f"the database did not answer within {seconds:g} s") from None


class DbRest:
    """Whether a database is resting after a failure; thread-safe enough for flags
    (a race lets one more call through, never none)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._retry_at = 0.0
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
        self._retry_at = now + RETRY_SECONDS
        return True

    def failed(self) -> None:
        self.is_ok = False
        self._retry_at = self.clock() + RETRY_SECONDS

    def succeeded(self) -> None:
        self.is_ok = True
