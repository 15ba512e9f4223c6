"""The authentication cache: bounded, aged, and holding only keys that were valid.

Issue 14: every invalid bearer token used to be cached forever (memory grew with
random tokens) and each new one cost a database query. Now:

* **valid keys** live in an LRU of at most ``max_entries`` digests. An entry is
  *fresh* for ``fresh_seconds`` (served without the database); after that the
  database is asked again. While the database is down a known key keeps
  working from memory (fail open), but only up to ``max_stale_seconds`` after it
  was last confirmed: a key revoked during a long outage stops working then.
* **unknown keys** go into a much smaller LRU (``max_negative``) for
  ``fresh_seconds``, so one client repeating a bad key costs one query per
  ``fresh_seconds`` and a flood of random keys can evict only that small table,
  never the valid keys, and never grow memory.

Keys are stored by SHA-256 digest only, never the raw key.

A change to a tenant (a key revoked or issued, the tenant disabled or deleted, its
policy edited), here or on another replica (the change feed), drops only that
tenant's entries (:meth:`AuthCache.invalidate`), and the unknown keys (one may have
just been issued). So a replica that then loses the database still serves the
other tenants' keys it confirmed within ``max_stale_seconds``; only when anything
may have changed (the feed rebuilt, it names no tenant) is everything dropped.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

MAX_ENTRIES = 10_000
MAX_NEGATIVE = 1_024
MAX_STALE_SECONDS = 300.0
#: Tenants whose last change is remembered (to refuse answers read before it); past
#: that, every answer read before the latest change is refused (none is dropped).
MAX_CHANGED_TENANTS = 10_000


def _tenant_id(value: Any) -> str | None:
    tenant = getattr(value, "tenant_id", None)
    return tenant if isinstance(tenant, str) else None


@dataclass(frozen=True)
class Cached(Generic[T]):
    value: T
    confirmed: float  # monotonic time the database last said so


class AuthCache(Generic[T]):
    """Thread-safe; every operation is O(1)."""

    def __init__(
        self,
        fresh_seconds: float,
        *,
        max_entries: int = MAX_ENTRIES,
        max_negative: int = MAX_NEGATIVE,
        max_stale_seconds: float = MAX_STALE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        tenant_of: Callable[[T], str | None] = _tenant_id,
    ) -> None:
        self.fresh_seconds = fresh_seconds
        self.max_entries, self.max_negative = max_entries, max_negative
        self.max_stale_seconds = max_stale_seconds
        self.clock = clock
        self.tenant_of = tenant_of
        self._valid: OrderedDict[str, Cached[T]] = OrderedDict()
        self._invalid: OrderedDict[str, float] = OrderedDict()
        self._by_tenant: dict[str | None, set[str]] = {}  # the digests of each tenant
        self._lock = threading.Lock()
        # Bumped by every invalidation: an answer read from the database before a change
        # (a key revoked, a tenant disabled) is not kept after it, or a revoked key would
        # be accepted for fresh_seconds (and up to max_stale_seconds in an outage).
        self._generation = 0
        self._changed: dict[str, int] = {}  # tenant -> the generation of its last change
        self._floor = 0  # answers read before this generation are refused (all tenants)

    @property
    def generation(self) -> int:
        """Read before asking the database; pass it to ``put_valid``/``put_invalid``."""
        with self._lock:
            return self._generation

    def fresh(self, digest: str) -> T | None:
        """The key's context if it was confirmed within ``fresh_seconds``."""
        with self._lock:
            hit = self._valid.get(digest)
            if hit is None or self.clock() - hit.confirmed >= self.fresh_seconds:
                return None
            self._valid.move_to_end(digest)
            return hit.value

    def known_invalid(self, digest: str) -> bool:
        """The database said "no such key" within ``fresh_seconds``."""
        with self._lock:
            at = self._invalid.get(digest)
            if at is None:
                return False
            if self.clock() - at >= self.fresh_seconds:
                del self._invalid[digest]
                return False
            return True

    def stale(self, digest: str) -> T | None:
        """For a database outage: the last confirmed context, if not older than
        ``max_stale_seconds`` (older ones are dropped)."""
        with self._lock:
            hit = self._valid.get(digest)
            if hit is None:
                return None
            if self.clock() - hit.confirmed >= self.max_stale_seconds:
                self._drop(digest)
                return None
            return hit.value

    def put_valid(self, digest: str, value: T, generation: int | None = None) -> None:
        """Keep ``value``, unless its tenant changed (or everything was cleared) since
        ``generation`` was read."""
        tenant = self.tenant_of(value)
        with self._lock:
            if generation is not None and (
                generation < self._floor
                or (tenant is not None and self._changed.get(tenant, -1) > generation)
            ):
                return
            self._invalid.pop(digest, None)
            self._drop(digest)
            self._valid[digest] = Cached(value, self.clock())
            self._by_tenant.setdefault(tenant, set()).add(digest)
            while len(self._valid) > self.max_entries:
                self._drop(next(iter(self._valid)))

    def put_invalid(self, digest: str, generation: int | None = None) -> None:
        """Remember "no such key", unless any tenant changed since ``generation`` (a key
        issued meanwhile must not be refused for ``fresh_seconds``)."""
        with self._lock:
            if generation is not None and generation != self._generation:
                return
            self._drop(digest)
            self._invalid[digest] = self.clock()
            self._invalid.move_to_end(digest)
            while len(self._invalid) > self.max_negative:
                self._invalid.popitem(last=False)

    def invalidate(self, tenants: Iterable[str]) -> None:
        """These tenants changed: drop their keys and every unknown key (one of theirs
        may have just been issued); no tenant named: anything may have changed, drop all."""
        changed = frozenset(tenants)
        if not changed:
            self.clear()
            return
        with self._lock:
            self._generation += 1
            for tenant in changed:
                for digest in self._by_tenant.pop(tenant, set()):
                    self._valid.pop(digest, None)
                self._changed[tenant] = self._generation
            self._invalid.clear()
            if len(self._changed) > MAX_CHANGED_TENANTS:  # bounded: refuse all older reads
                self._changed.clear()
                self._floor = self._generation

    def clear(self) -> None:
        with self._lock:
            self._valid.clear()
            self._invalid.clear()
            self._by_tenant.clear()
            self._changed.clear()
            self._generation += 1
            self._floor = self._generation

    def _drop(self, digest: str) -> None:
        """Forget a valid entry (lock held)."""
        hit = self._valid.pop(digest, None)
        if hit is None:
            return
        tenant = self.tenant_of(hit.value)
        digests = self._by_tenant.get(tenant)
        if digests is not None:
            digests.discard(digest)
            if not digests:
                del self._by_tenant[tenant]

    def sizes(self) -> tuple[int, int]:
        """(valid entries, negative entries): what the bounds are checked against."""
        with self._lock:
            return len(self._valid), len(self._invalid)
