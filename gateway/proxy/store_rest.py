"""The semantic store's health as the request path sees it, and the rest after a failure.

The semantic layer fails open: a store that fails makes requests skip the layer
(``skipped:store_unavailable``) and reach the model. A database that hangs costs each
call its connect timeout (5 s), so after a failure the layer rests: for
``STORE_RETRY_SECONDS`` nothing asks the store, and the first call after the rest tries
again. A database that hangs instead of refusing never fails a call, so the request
path bounds its waits (``gateway/proxy/pipeline.py``: a lookup or a backfill past its
deadline counts as a failure; ``gateway/db_rest.py``). A ping (:meth:`StoreRest.check`,
from /ready or from the background watch in ``gateway/recovery.py``) that succeeds
ends the rest early.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import text

from gateway.db_rest import DbDeadlineError, Probe, backoff
from gateway.metrics import GatewayMetrics
from semantic import SemanticCache
from semantic.errors import StoreUnavailableError
from semantic.store_db import OUTAGE_ERRORS

log = logging.getLogger("cachegate.gateway")

#: Seconds the semantic layer rests after the store failed (see the module docstring).
STORE_RETRY_SECONDS = 5.0
#: How long /ready waits for the store's ping: one that hangs is not ready.
PING_DEADLINE_SECONDS = 3.0
#: What a ping that found the store away raises (a hang: the deadline).
PING_FAILURES: tuple[type[Exception], ...] = (*OUTAGE_ERRORS, DbDeadlineError)


class StoreRest:
    def __init__(self, metrics: GatewayMetrics) -> None:
        self.metrics = metrics
        self.is_ok = True  # the last semantic DB call succeeded (shown by /ready)
        self._retry_at = 0.0  # monotonic time the store is tried again after a failure
        self._probe = Probe()  # /ready's pings, shared by concurrent checks
        self._failures = 0  # tries in a row that failed: the rest doubles with them

    def is_resting(self) -> bool:
        """Whether the layer rests now (no side effect: the event loop asks this before
        queueing a lookup, so none queues behind threads stuck on a hung database)."""
        return not self.is_ok and time.monotonic() < self._retry_at

    def raise_if_resting(self) -> None:
        """Raise StoreUnavailableError while the layer rests; the first call after the
        rest goes through (and the calls behind it rest on until it is answered)."""
        if self.is_ok:
            return
        now = time.monotonic()
        if now < self._retry_at:
            raise StoreUnavailableError("the semantic store failed moments ago; resting")
        self._failures += 1  # a retry: if it fails too, the next rest is longer
        self._retry_at = now + self._rest()  # this call tries; the others rest

    def succeeded(self) -> None:
        self.is_ok = True
        self._failures = 0

    def _rest(self) -> float:
        """``STORE_RETRY_SECONDS``, doubled with each try in a row that failed, up to
        ``MAX_RETRY_SECONDS``: in a long outage of a database that hangs, requests
        spaced wider than the rest would otherwise each pay the lookup's deadline."""
        return backoff(STORE_RETRY_SECONDS, self._failures)

    def failed(self, exc: Exception) -> None:
        """A call on the store failed: log the outage once, rest, count it."""
        if self.is_ok:
            log.error(
                "semantic store unavailable, serving without it (retried after %g s,"
                " then less often while it stays away): %s",
                STORE_RETRY_SECONDS,
                exc,
            )
            self._failures = 1
            self._retry_at = time.monotonic() + self._rest()
        elif time.monotonic() >= self._retry_at:  # a retry after the rest failed too
            self._retry_at = time.monotonic() + self._rest()
        self.is_ok = False
        self.metrics.store_unavailable.inc()

    async def hung_after_deadline(self, cache: SemanticCache | None, what: str) -> bool:
        """A call on the store ran past its deadline: the store hangs if its ping does not
        answer either (the layer then rests, as after any failure). If the ping answers,
        the call was slow for another reason (a model still loading, a CPU busy with
        other lookups), and only that request goes without the layer: resting would
        switch the cache off for every tenant for a store that is well."""
        if await self.check(cache):
            log.warning("semantic %s ran past its deadline while the store answers", what)
            return False
        self.failed(StoreUnavailableError(f"the {what} got no answer in time"))
        return True

    async def check(self, cache: SemanticCache | None) -> bool:
        """Ping the semantic store now (for /ready) and remember the answer, so
        readiness follows an outage and its recovery without waiting for a request."""
        if cache is None:
            return True
        try:
            await self._probe.run(PING_DEADLINE_SECONDS, _ping, cache)
        except PING_FAILURES as exc:
            if self.is_ok:
                log.error("semantic store unavailable: %s", exc)
            self.is_ok = False
            self._retry_at = time.monotonic() + self._rest()
            return False
        self.succeeded()
        return True


def _ping(cache: SemanticCache) -> None:
    with cache.entries.engine.connect() as conn:
        conn.execute(text("SELECT 1"))
