"""Per-tenant request rate limits (``policy.rate_limit_rpm``): a token bucket per tenant.

Each tenant's bucket holds up to ``rpm`` tokens and refills at ``rpm / 60`` tokens
per second; a request takes one token, so a tenant may burst up to ``rpm``
requests and then sustain ``rpm`` per minute. A request that finds the bucket
empty is refused with :class:`~gateway.errors.RateLimitError` (HTTP 429) and a
``Retry-After`` header: whole seconds (at least 1) until a token is back.

The buckets live in this process's memory: **each gateway replica enforces the
limit on its own**, so N replicas behind a round-robin balancer let a tenant
through at up to N × rpm in total. A shared limit (Redis) is issue 7. A policy
change (a new rpm, or no limit) applies to the next request.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.errors import RateLimitError
from gateway.tenants import TenantContext

Clock = Callable[[], float]


@dataclass
class _Bucket:
    rpm: int
    tokens: float
    updated: float


class RateLimiter:
    """Thread-safe; ``check`` is O(1) and never touches the database."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._refused: dict[str, int] = {}
        self._lock = threading.Lock()

    def check(self, ctx: TenantContext) -> None:
        """Take one token from the tenant's bucket, or raise ``RateLimitError`` (429)."""
        rpm = ctx.policy.rate_limit_rpm
        if rpm is None:
            with self._lock:
                self._buckets.pop(ctx.tenant_id, None)
            return
        now = self.clock()
        with self._lock:
            bucket = self._buckets.get(ctx.tenant_id)
            if bucket is None:
                bucket = self._buckets[ctx.tenant_id] = _Bucket(rpm, float(rpm), now)
            elif bucket.rpm != rpm:  # the policy changed: keep what is left, within the new size
                bucket.rpm = rpm
                bucket.tokens = min(bucket.tokens, float(rpm))
            rate = rpm / 60.0
            bucket.tokens = min(float(rpm), bucket.tokens + max(0.0, now - bucket.updated) * rate)
            bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return
            self._refused[ctx.tenant_id] = self._refused.get(ctx.tenant_id, 0) + 1
            retry_after = max(1, math.ceil((1.0 - bucket.tokens) / rate))
        raise RateLimitError(
            f"rate limit of {rpm} requests per minute exceeded for tenant {ctx.tenant_id!r}; "
            f"retry after {retry_after} s",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(retry_after)},
        )

    def refused(self, tenant_id: str) -> int:
        """Requests of the tenant this replica refused since it started."""
        with self._lock:
            return self._refused.get(tenant_id, 0)

    def forget(self, tenant_id: str) -> None:
        """Drop the tenant's bucket and counters (the tenant was deleted)."""
        with self._lock:
            self._buckets.pop(tenant_id, None)
            self._refused.pop(tenant_id, None)
