"""Ends the database rests as soon as the database answers again, without a request.

After a database hangs, the key store and the semantic layer rest from it
(gateway/db_rest.py, gateway/proxy/store_rest.py): for 5 s, doubling to 30 s while
failures go on, nothing on the request path asks it. That keeps requests from paying a
deadline each, but once the hang ends, unknown keys kept getting 503 and lookups kept
being skipped until the rest ran out, or until a load balancer's /ready check happened
to ping. This watch pings in the background instead, once a second and only while a
rest is on: a ping that answers ends the rest at once. The pings go through the same
:class:`Probe` as /ready's, so a hung ping holds one thread, never one per second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from gateway.db_rest import DbRest

log = logging.getLogger("cachegate.gateway")

#: Seconds between background pings while a rest is on.
PROBE_EVERY_SECONDS = 1.0


class RecoveryWatch:
    """Pings the key store's database while ``key_rest`` is on (``ping_keys`` answers
    whether it answered) and the semantic store while ``store_is_ok()`` is false
    (``ping_store`` records its own answer, ending the semantic rest on success)."""

    def __init__(
        self,
        key_rest: DbRest,
        ping_keys: Callable[[], Awaitable[bool]],
        store_is_ok: Callable[[], bool],
        ping_store: Callable[[], Awaitable[bool]],
    ) -> None:
        self.key_rest = key_rest
        self.ping_keys = ping_keys
        self.store_is_ok = store_is_ok
        self.ping_store = ping_store
        self.num_recoveries = 0  # rests ended by this watch (for tests and logs)
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
        """One round: ping what rests, together (one hang costs one deadline)."""
        keys = not self.key_rest.is_ok
        store = not self.store_is_ok()
        if not (keys or store):
            return
        results = await asyncio.gather(
            self.ping_keys() if keys else _false(),
            self.ping_store() if store else _false(),
        )
        if keys and results[0] and not self.key_rest.is_ok:
            self.key_rest.succeeded()
            self.num_recoveries += 1
            log.info("key store answers again: authentication no longer rests")
        if store and results[1]:
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
