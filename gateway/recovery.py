"""Ends the database rests as soon as the database answers again, without a request.

After a database hangs, the key store and the semantic layer rest from it
(gateway/db_rest.py, gateway/proxy/store_rest.py): for 5 s, doubling to 30 s while
failures go on, nothing on the request path asks it. That keeps requests from paying a
deadline each, but once the hang ends, unknown keys kept getting 503 and lookups kept
being skipped until the rest ran out, or until a load balancer's /ready check happened
to ping (and the verifier calibration, away after a failed read, probed again only
after its own rest). This watch pings in the background instead, once a second and
only while something waits: a ping that answers ends the rest at once. The pings go
through the same :class:`Probe` as /ready's, so a hung ping holds one thread, never
one per second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("cachegate.gateway")

#: Seconds between background pings while a rest is on.
PROBE_EVERY_SECONDS = 1.0


#: (whether it waits for the gateway database, what to do once that answers)
Waiter = tuple[Callable[[], bool], Callable[[], None]]


class RecoveryWatch:
    """Pings the gateway's database while any of ``waiters`` waits for it (the key
    store's rest; the verifier calibration's outage) and tells each that waits when it
    answers; pings the semantic store while ``store_is_ok()`` is false (``ping_store``
    records its own answer, ending the semantic rest on success)."""

    def __init__(
        self,
        waiters: list[Waiter],
        ping_db: Callable[[], Awaitable[bool]],
        store_is_ok: Callable[[], bool],
        ping_store: Callable[[], Awaitable[bool]],
    ) -> None:
        self.waiters = waiters
        self.ping_db = ping_db
        self.store_is_ok = store_is_ok
        self.ping_store = ping_store
        self.num_recoveries = 0  # answers this watch passed on (for tests and logs)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="db-recovery")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def check_once(self) -> None:
        """One round: ping what is waited for, together (one hang costs one deadline)."""
        waiting = [on_answer for is_waiting, on_answer in self.waiters if is_waiting()]
        store = not self.store_is_ok()
        if not (waiting or store):
            return
        db_ok, store_ok = await asyncio.gather(
            self.ping_db() if waiting else _false(),
            self.ping_store() if store else _false(),
        )
        if db_ok:
            for on_answer in waiting:
                on_answer()
            self.num_recoveries += 1
            log.info("gateway database answers again: authentication and cuts resume")
        if store_ok:
            self.num_recoveries += 1
            log.info("semantic store answers again: lookups resume")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(PROBE_EVERY_SECONDS)
            try:
                await self.check_once()
            except Exception:  # the watch must outlive anything a ping raises
                log.exception("database recovery check failed")


async def _false() -> bool:
    return False
