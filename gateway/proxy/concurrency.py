"""Requests a tenant may have in flight at once (``policy.max_concurrent_requests``).

A requests-per-minute bucket bounds how often a tenant may ask, not how much it holds:
a tenant within its rpm can still open hundreds of long streams at once and hold every
engine slot, upstream connection and gateway task. With ``max_concurrent_requests``
set, a request past the cap is refused at once with a 429 ``too_many_concurrent_requests``
and ``Retry-After: 1`` (LiteLLM's ``max_parallel_requests`` answers the same way); the
others are untouched.

A request holds its slot from just after authentication until its response has ended
(a stream's last event sent) or its client has left, whatever ended it:
:class:`ReleaseSlots`, an ASGI middleware around the app, releases what the route took
when the whole ASGI call returns, so no error path, cancellation or disconnect can leak
one. Semantic hits count too: the cap is on what a tenant holds of the gateway, and a
hit holds it for milliseconds.

Behind several replicas the count is shared (since session 49): each request holds a
lease in Redis or PostgreSQL, renewed while it runs and expiring with a replica that
died (``gateway/proxy/concurrency_shared.py``). The store is asked off the event loop
within the rate limit's deadline; while it is down, hangs or is not migrated, each
replica counts its own requests (before session 49 it always did: N replicas let a
tenant hold N × the cap). With no shared store (SQLite: one replica) the count is this
process's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.errors import RateLimitError
from gateway.proxy.concurrency_shared import SlotStore, SlotStoreCollector
from gateway.tenants import TenantContext

#: Where a route leaves the release of the slot it took, for :class:`ReleaseSlots`.
RELEASE_KEY = "cachegate_release_slot"


@dataclass
class Claim:
    """A shared take the request may stop waiting for (a store that hangs, a client
    that leaves): whichever comes second, the take or the giving up, gives the lease
    back, so a take that lands late never holds a slot that nobody releases."""

    release: Callable[[], None] | None = None
    abandoned: bool = False
    started: bool = False  # the take reached the store's thread (not a busy pool's queue)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def land(self, release: Callable[[], None] | None) -> Callable[[], None] | None:
        with self.lock:
            if not self.abandoned:
                self.release = release
                return release
        if release is not None:
            release()
        return None

    def abandon(self) -> None:
        with self.lock:
            self.abandoned, release = True, self.release
        if release is not None:
            release()


class TenantConcurrency:
    """In-flight requests per tenant: in the shared store when there is one and it
    answers, else on this replica."""

    def __init__(self, shared: SlotStore | None = None) -> None:
        self.shared = shared
        self._in_flight: dict[str, int] = {}
        self._refused: dict[str, int] = {}
        self._lock = threading.Lock()

    def asks_store(self, ctx: TenantContext) -> bool:
        """Whether the tenant's slot is taken in the shared store now (a round trip:
        :meth:`acquire_shared`, off the event loop), not counted here."""
        if ctx.policy.max_concurrent_requests is None or self.shared is None:
            return False
        return not self.shared.would_bypass()

    def acquire_shared(self, ctx: TenantContext, claim: Claim) -> Callable[[], None] | None:
        """:meth:`acquire` through the shared store (blocking); counted here when the
        store fails. The release lands in ``claim`` (see :class:`Claim`)."""
        claim.started = True
        cap = ctx.policy.max_concurrent_requests
        if cap is None or self.shared is None:
            return claim.land(self.acquire(ctx))
        key, shared = self._key(ctx), self.shared
        # Requests counted here while the store was away are not in it: they take room.
        room = cap - self.in_flight(ctx)
        taken, lease = shared.acquire(key, room) if room > 0 else (None, "")
        if taken is not None and taken.tokens is None:  # not asked, or failed: counted here
            return claim.land(self.acquire(ctx))
        if taken is None or not taken.allowed:
            with self._lock:
                self._refused[key] = self._refused.get(key, 0) + 1
            raise _refusal(ctx, cap)
        return claim.land(_once(lambda: shared.release(key, lease)))

    @staticmethod
    def _key(ctx: TenantContext) -> str:
        return ctx.namespace_id or ctx.tenant_id  # one incarnation of the tenant

    def acquire(self, ctx: TenantContext) -> Callable[[], None] | None:
        """Take one of the tenant's slots on this replica: its release (call it once),
        None for a tenant without a cap, or a 429 :class:`RateLimitError` when every
        slot is held."""
        cap = ctx.policy.max_concurrent_requests
        if cap is None:
            return None
        key = self._key(ctx)
        # The leases this replica holds in the store count too (taken before it went away).
        leased = self.shared.held_for(key) if self.shared is not None else 0
        with self._lock:
            held = self._in_flight.get(key, 0)
            if held + leased >= cap:
                self._refused[key] = self._refused.get(key, 0) + 1
                refused = True
            else:
                self._in_flight[key] = held + 1
                refused = False
        if refused:
            raise _refusal(ctx, cap)
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                left = self._in_flight.get(key, 0) - 1
                if left > 0:
                    self._in_flight[key] = left
                else:
                    self._in_flight.pop(key, None)

        return release

    def in_flight(self, ctx: TenantContext) -> int:
        """The tenant's requests counted on this replica (not those in the store)."""
        with self._lock:
            return self._in_flight.get(self._key(ctx), 0)

    def refused(self, ctx: TenantContext) -> int:
        """Requests of the tenant this replica refused for its cap since it started."""
        with self._lock:
            return self._refused.get(self._key(ctx), 0)

    def close(self) -> None:
        if self.shared is not None:
            self.shared.close()

    def bind_metrics(self, registry: CollectorRegistry) -> None:
        """Export the shared store's failures and breaker (none without a store)."""
        if self.shared is not None:
            registry.register(SlotStoreCollector(self.shared))

    def check_integrity(self) -> None:
        with self._lock:
            assert all(n > 0 for n in self._in_flight.values()), self._in_flight
            assert all(n > 0 for n in self._refused.values()), self._refused


def _refusal(ctx: TenantContext, cap: int) -> RateLimitError:
    return RateLimitError(
        f"tenant {ctx.tenant_id!r} has {cap} requests in flight, its limit; "
        "retry when one has finished",
        code="too_many_concurrent_requests",
        headers={"Retry-After": "1"},
    )


def _once(release: Callable[[], None]) -> Callable[[], None]:
    """``release`` that runs at most once (a second call must not free another's slot)."""
    done = threading.Lock()

    def once() -> None:
        if done.acquire(blocking=False):
            release()

    return once


def keep_slot(scope_state: dict[str, object], release: Callable[[], None] | None) -> None:
    """Leave the slot's release where :class:`ReleaseSlots` gives it back."""
    if release is not None:
        scope_state[RELEASE_KEY] = release


class ReleaseSlots:
    """ASGI middleware: gives back the slot a request took once its ASGI call returns
    (the response sent, an error answered, the client gone, the task cancelled)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            state = scope.get("state")
            release = state.pop(RELEASE_KEY, None) if isinstance(state, dict) else None
            if release is not None:
                release()
