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

The count is per gateway replica (in memory, like ``CACHEGATE_MAX_NUM_SEQS_PER_TENANT``
per engine): behind N replicas a tenant may hold up to N × the cap. A shared count would
have to survive a replica dying with slots held (leases, renewals), and the cap is a
guard against one tenant flooding a replica, which a per-replica count is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.errors import RateLimitError
from gateway.tenants import TenantContext

#: Where a route leaves the release of the slot it took, for :class:`ReleaseSlots`.
RELEASE_KEY = "cachegate_release_slot"


class TenantConcurrency:
    """In-flight requests per tenant on this replica."""

    def __init__(self) -> None:
        self._in_flight: dict[str, int] = {}
        self._refused: dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, ctx: TenantContext) -> Callable[[], None] | None:
        """Take one of the tenant's slots: its release (call it once), None for a tenant
        without a cap, or a 429 :class:`RateLimitError` when every slot is held."""
        cap = ctx.policy.max_concurrent_requests
        if cap is None:
            return None
        key = ctx.namespace_id or ctx.tenant_id  # one incarnation of the tenant
        with self._lock:
            held = self._in_flight.get(key, 0)
            if held >= cap:
                self._refused[key] = self._refused.get(key, 0) + 1
                refused = True
            else:
                self._in_flight[key] = held + 1
                refused = False
        if refused:
            raise RateLimitError(
                f"tenant {ctx.tenant_id!r} has {cap} requests in flight, its limit; "
                "retry when one has finished",
                code="too_many_concurrent_requests",
                headers={"Retry-After": "1"},
            )
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
        with self._lock:
            return self._in_flight.get(ctx.namespace_id or ctx.tenant_id, 0)

    def refused(self, ctx: TenantContext) -> int:
        """Requests of the tenant this replica refused for its cap since it started."""
        with self._lock:
            return self._refused.get(ctx.namespace_id or ctx.tenant_id, 0)

    def check_integrity(self) -> None:
        with self._lock:
            assert all(n > 0 for n in self._in_flight.values()), self._in_flight
            assert all(n > 0 for n in self._refused.values()), self._refused


def take_slot(scope_state: dict[str, object], slots: TenantConcurrency, ctx: TenantContext) -> None:
    """Take the tenant's slot for this request; :class:`ReleaseSlots` gives it back."""
    release = slots.acquire(ctx)
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
