"""Per-tenant request rate limits (``policy.rate_limit_rpm``): a token bucket per tenant.

Each tenant's bucket holds up to ``rpm`` tokens and refills at ``rpm / 60`` tokens
per second; a request takes one token, so a tenant may burst up to ``rpm``
requests and then sustain ``rpm`` per minute. A request that finds the bucket
empty is refused with :class:`~gateway.errors.RateLimitError` (HTTP 429) and a
``Retry-After`` header: whole seconds (at least 1) until a token is back.

Where the buckets live (:mod:`gateway.proxy.ratelimit_shared` builds the store):

* **Redis** (``CACHEGATE_REDIS_URL``, else ``CACHEGATE_KV_REDIS_URL``) or
  **PostgreSQL** (the gateway's database): one bucket per tenant for all gateway
  replicas, so N replicas behind a balancer still let a tenant through at
  ``rpm`` in total. If the shared store does not answer, the request is let
  through (and logged): a limit is not worth an outage. A circuit breaker then
  leaves the store alone for a few seconds, so a store that hangs does not slow
  every limited request by its timeout; :meth:`RateLimiter.bind_metrics` exports
  ``cachegate_ratelimit_store_failures_total``, ``..._bypassed_total`` and
  ``cachegate_ratelimit_store_open`` (alert: ``CachegateRateLimitStoreDown``).
* **this process** (SQLite, one replica): :class:`LocalBuckets`.

A policy change (a new rpm, or no limit) applies to the next request. A bucket is
keyed by the tenant's id and the id minted at its creation (:func:`bucket_key`), so a
tenant deleted while the shared store was down (its bucket not dropped) and created
again under the same id starts with a full bucket, not the old tenant's.

Each answer to a limited tenant says where its bucket stands, in the headers OpenAI's
API sends (:func:`limit_headers`): ``x-ratelimit-limit-requests`` (rpm),
``x-ratelimit-remaining-requests`` (whole tokens left) and
``x-ratelimit-reset-requests`` (until the bucket is full again, as ``1m2.5s``). They
are the tenant's own and win over an upstream's of the same names, which count the
gateway's account, shared by every tenant. A store that was not asked (down, its
breaker open) gives none: nothing is known.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gateway.errors import RateLimitError
from gateway.tenants import TenantContext

Clock = Callable[[], float]


class Taken(NamedTuple):
    """One take from a tenant's bucket."""

    allowed: bool
    wait: float  # seconds until a token is back (0 when allowed)
    tokens: float | None = None  # left after this take; None: the store was not asked


#: ``need`` of a charge: taken whatever the bucket holds (gateway/proxy/token_limit.py).
ALWAYS = -1e18

#: How deep a bucket's debt may go, in minutes of its limit: a charge past what is left
#: is kept whole up to this (before session 44 at most one minute was, so an answer
#: costing more than a minute's tokens was written off beyond it, and a tenant whose
#: answers each cost 50 minutes of its tpm spent 45 times its limit: a review); a
#: debt run up under a higher limit waits out at most this long under a lower one.
DEBT_MINUTES = 60


class BucketStore(Protocol):
    """Takes tokens from a tenant's bucket: by default one, if one is there. A bucket of
    model tokens (``gateway/proxy/token_limit.py``) is checked with ``cost=0`` (admitted
    while it holds ``need`` = 1) and charged after the answer with ``need=ALWAYS``."""

    name: str

    def take(self, tenant_id: str, rpm: int, cost: float = 1.0, need: float = 1.0) -> Taken: ...

    def drop(self, tenant_id: str) -> None: ...


def refill(
    tokens: float, elapsed: float, rpm: int, cost: float = 1.0, need: float = 1.0
) -> tuple[bool, float, float]:
    """The bucket arithmetic every store shares: (allowed, tokens left, wait seconds).
    A bucket of size ``rpm`` refills at ``rpm`` a minute; when it holds ``need``,
    ``cost`` is taken, down to ``-DEBT_MINUTES * rpm`` at most (a charge past what is
    left is a debt the bucket refills first; a full bucket is at most DEBT_MINUTES + 1
    minutes away, under the limit in force: a debt deeper than it allows is cut)."""
    rate = rpm / 60.0
    floor = -float(DEBT_MINUTES * rpm)
    tokens = min(float(rpm), max(floor, tokens) + max(0.0, elapsed) * rate)
    if tokens >= need:
        return True, max(floor, tokens - cost), 0.0
    return False, tokens, (need - tokens) / rate


@dataclass
class _Bucket:
    rpm: int
    tokens: float
    updated: float


class LocalBuckets:
    """Buckets in this process's memory: each replica limits on its own."""

    name = "local"

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, tenant_id: str, rpm: int, cost: float = 1.0, need: float = 1.0) -> Taken:
        now = self.clock()
        with self._lock:
            bucket = self._buckets.get(tenant_id)
            if bucket is None:
                bucket = self._buckets[tenant_id] = _Bucket(rpm, float(rpm), now)
            elif bucket.rpm != rpm:  # the policy changed: keep what is left, within the new size
                bucket.rpm = rpm
                bucket.tokens = min(bucket.tokens, float(rpm))
            elapsed = now - bucket.updated
            allowed, bucket.tokens, wait = refill(bucket.tokens, elapsed, rpm, cost, need)
            bucket.updated = now
            return Taken(allowed, wait, bucket.tokens)

    def drop(self, tenant_id: str) -> None:
        with self._lock:
            self._buckets.pop(tenant_id, None)


class _StoreCollector:
    """The store's breaker, read at scrape time (a local store: always closed, zero)."""

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter

    def collect(self) -> Iterator[Metric]:
        store = self.limiter.store
        labels = [store.name]
        failures = CounterMetricFamily(
            "cachegate_ratelimit_store_failures",
            "Calls to the shared rate-limit store (Redis or PostgreSQL) that failed",
            labels=["store"],
        )
        failures.add_metric(labels, getattr(store, "failures", 0))
        bypassed = CounterMetricFamily(
            "cachegate_ratelimit_store_bypassed",
            "Rate-limited requests let through unlimited: the store failed or was left "
            "alone after a failure",
            labels=["store"],
        )
        bypassed.add_metric(labels, getattr(store, "bypassed", 0))
        opened = GaugeMetricFamily(
            "cachegate_ratelimit_store_open",
            "1 while the rate-limit store's circuit breaker is open (it failed and no probe "
            "has succeeded since): tenants' rate limits are not enforced",
            labels=["store"],
        )
        opened.add_metric(labels, 1.0 if getattr(store, "is_open", False) else 0.0)
        yield from (failures, bypassed, opened)


class RateLimiter:
    """Thread-safe; ``check`` never touches the gateway's tenant tables."""

    def __init__(self, clock: Clock = time.monotonic, store: BucketStore | None = None) -> None:
        self.store: BucketStore = store if store is not None else LocalBuckets(clock)
        self._refused: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def clock(self) -> Clock:
        return getattr(self.store, "clock", time.monotonic)

    @clock.setter
    def clock(self, clock: Clock) -> None:  # tests drive a local store's time
        if isinstance(self.store, LocalBuckets):
            self.store.clock = clock

    def check(self, ctx: TenantContext) -> dict[str, str]:
        """Take one token from the tenant's bucket, or raise ``RateLimitError`` (429).
        Returns the headers saying where the bucket stands (none for an unlimited
        tenant, or when the store was not asked); the 429 carries them too."""
        rpm = ctx.policy.rate_limit_rpm
        if rpm is None:
            if isinstance(self.store, LocalBuckets):  # free here; a shared one expires alone
                self.store.drop(bucket_key(ctx.tenant_id, ctx.namespace_id))
            return {}
        taken = self.store.take(bucket_key(ctx.tenant_id, ctx.namespace_id), rpm)
        headers = limit_headers(rpm, taken.tokens)
        if taken.allowed:
            return headers
        raise self.refusal(ctx, f"{rpm} requests", taken.wait, headers)

    def standing(self, ctx: TenantContext) -> dict[str, str]:
        """The request bucket's headers without taking its token (for a 429 of another
        limit, which spends none); none for a tenant without ``rate_limit_rpm``."""
        rpm = ctx.policy.rate_limit_rpm
        if rpm is None:
            return {}
        read = self.store.take(bucket_key(ctx.tenant_id, ctx.namespace_id), rpm, 0.0, ALWAYS)
        return limit_headers(rpm, read.tokens)

    def refusal(
        self, ctx: TenantContext, limit: str, wait: float, headers: dict[str, str]
    ) -> RateLimitError:
        """The 429 of a tenant past ``limit`` a minute ("60 requests", "1000 tokens",
        gateway/proxy/token_limit.py), counted with its refusals, ``Retry-After`` the
        whole seconds (at least 1) until ``wait`` has passed."""
        with self._lock:
            key = bucket_key(ctx.tenant_id, ctx.namespace_id)  # this incarnation's
            self._refused[key] = self._refused.get(key, 0) + 1
        retry_after = max(1, math.ceil(wait))
        return RateLimitError(
            f"rate limit of {limit} per minute exceeded for tenant {ctx.tenant_id!r}; "
            f"retry after {retry_after} s",
            code="rate_limit_exceeded",
            headers=headers | {"Retry-After": str(retry_after)},
        )

    def would_bypass(self) -> bool:
        """Whether the shared store's breaker lets a check through now without asking
        it (:meth:`_FailOpen.would_bypass`); never for the local store."""
        bypass = getattr(self.store, "would_bypass", None)
        return bool(bypass()) if bypass is not None else False

    def store_hung(self, exc: Exception) -> None:
        """The shared store did not answer within the request's deadline: as a failure
        (the breaker opens; limits are not enforced meanwhile)."""
        hung = getattr(self.store, "hung", None)
        if hung is not None:
            hung(exc)

    def bind_metrics(self, registry: CollectorRegistry) -> None:
        """Export the store's failures and breaker state into ``registry``."""
        registry.register(_StoreCollector(self))

    def refused(self, tenant_id: str, namespace_id: str = "") -> int:
        """Requests of the tenant (its incarnation: ``namespace_id``, minted at its
        creation) this replica refused since it started. Keyed by id alone, a tenant
        created again under a deleted one's id showed the old one's count on every
        replica but the one that ran the delete (an admin review)."""
        with self._lock:
            return self._refused.get(bucket_key(tenant_id, namespace_id), 0)

    def forget(self, tenant_id: str, namespace_id: str = "") -> None:
        """Drop the tenant's buckets and counters (the tenant was deleted), and the bucket
        its id alone keyed before the minted key (a replica not yet upgraded)."""
        self.store.drop(bucket_key(tenant_id, namespace_id))
        self.store.drop(token_bucket_key(tenant_id, namespace_id))
        if namespace_id:
            self.store.drop(tenant_id)
        with self._lock:
            self._refused.pop(bucket_key(tenant_id, namespace_id), None)


def bucket_key(tenant_id: str, namespace_id: str) -> str:
    """The bucket of one incarnation of a tenant: the id minted at its creation (39
    characters, within the store's 64, however long the tenant id; a tenant id has no
    ``:``, so the two kinds of key never meet). A tenant created before migration 0005
    has none: its id alone, as before."""
    return f"minted:{namespace_id}" if namespace_id else tenant_id


def token_bucket_key(tenant_id: str, namespace_id: str) -> str:
    """The tenant's bucket of model tokens (``gateway/proxy/token_limit.py``), beside its
    request bucket in the same store: within the store's 64 characters however long a
    tenant id of before migration 0005 is."""
    key = bucket_key(tenant_id, namespace_id)
    if len(key) <= 60:
        return f"tpm:{key}"
    return "tpm:" + hashlib.sha256(key.encode()).hexdigest()[:56]


#: The request-limit headers a rate-limited tenant gets from its own bucket only.
REQUEST_LIMIT_HEADERS = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
)


def limit_headers(rpm: int, tokens: float | None) -> dict[str, str]:
    """OpenAI's request-limit headers for a bucket of ``rpm`` holding ``tokens``."""
    if tokens is None:
        return {}
    tokens = min(float(rpm), max(0.0, tokens))
    return {
        "x-ratelimit-limit-requests": str(rpm),
        "x-ratelimit-remaining-requests": str(math.floor(tokens)),
        "x-ratelimit-reset-requests": duration((rpm - tokens) / (rpm / 60.0)),
    }


def duration(seconds: float) -> str:
    """Seconds as OpenAI writes them in ``x-ratelimit-reset-*``: ``0s``, ``17ms``,
    ``6.5s``, ``1m0s``, ``2h3m4s`` (Go's time.Duration, to the millisecond)."""
    ms = max(0, math.ceil(round(seconds * 1000, 6)))  # 700.0000000001 ms is 700 ms
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + f"{secs}s"
