"""In-flight slots shared by every gateway replica: leases in Redis, or PostgreSQL.

A tenant's ``max_concurrent_requests`` is its cap across the deployment, not per
replica: behind N replicas counted each on its own, a tenant could hold N × the cap
(LiteLLM's ``max_parallel_requests`` is shared through Redis for the same reason). A
request holds a *lease* in the shared store: a member of the tenant's set with an
expiry time, taken only while fewer than the cap are unexpired, in one atomic step on
the server with the server's clock (a Lua script in Redis; a transaction under an
advisory lock on the tenant's key in PostgreSQL).

A replica that dies with requests in flight cannot give their leases back, so a lease
lasts ``lease_s`` (30 s) and the replica renews the ones it holds every ``lease_s / 3``
on a thread of its own: a stream of ten minutes keeps its slot, a dead replica's slots
come back within ``lease_s``. A release is a round trip too, so that thread makes it
(the request's end never waits for the store), batched with the others waiting, and
tries again one that failed until its lease would have expired anyway.

When the store fails or hangs (a circuit breaker, as for the shared rate limit:
``gateway/proxy/ratelimit_shared.py``) the cap is counted on each replica instead,
which is what it was before session 49: degraded to N × the cap, never unlimited and
never refusing everyone. Each replica counts both kinds together (its leases in the
store and the requests it counted itself), so the switch either way admits no more
than the cap on that replica. A lease that expired while the store was away (for want
of renewals) is not put back: its request ends uncounted by the store.

The stores themselves, and :func:`~gateway.proxy.concurrency_stores.build_slot_store`,
are in ``gateway/proxy/concurrency_stores.py``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gateway.proxy.ratelimit import Taken
from gateway.proxy.ratelimit_shared import COOLDOWN_S, FailOpen

log = logging.getLogger("cachegate.gateway.concurrency")

#: How long a lease lasts without a renewal: how soon a dead replica's slots come back.
LEASE_S = 30.0

Pair = tuple[str, str]  # (tenant key, lease id)


class SlotStore(FailOpen):
    """Leases of in-flight requests in a shared store, behind a circuit breaker: a take
    the breaker lets through unasked (or one that failed) says so (``tokens`` None), and
    the caller counts the request on its replica instead.

    Releases and renewals run on one worker thread, in batches (one round trip for all
    the releases waiting). A release is not subject to the breaker: one that fails (or
    a take that failed and may have landed) is kept and tried again at each round until
    its lease would have expired anyway (``releases_expired`` counts those)."""

    role = "in-flight slot"
    degraded = "counting each replica's own"

    def __init__(self, lease_s: float = LEASE_S, cooldown: float = COOLDOWN_S) -> None:
        super().__init__(cooldown)
        self.lease_s = lease_s
        self.releases_expired = 0
        self._held: dict[str, set[str]] = {}  # key -> the leases this replica holds
        self._releasing: dict[Pair, float] = {}  # -> monotonic time its lease is moot
        self._held_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None

    def acquire(self, key: str, cap: int) -> tuple[Taken, str]:
        """Take a lease of ``key``'s slots while fewer than ``cap`` are held: (the
        store's answer, the lease id). ``Taken.tokens`` is the leases held after the
        call, None when the store was not asked or failed; ``allowed`` False: refused."""
        lease = uuid.uuid4().hex
        asked = False

        def attempt() -> Taken:
            nonlocal asked
            asked = True
            return self._acquire(key, cap, lease)

        taken = self._guarded(attempt)
        if taken.tokens is not None and taken.allowed:
            with self._held_lock:
                self._held.setdefault(key, set()).add(lease)
        elif taken.tokens is None and asked:  # failed: it may have landed all the same
            self._give_back([(key, lease)])
        else:
            return taken, lease
        self._start()
        return taken, lease

    def release(self, key: str, lease: str) -> None:
        """Give a lease back: no longer renewed at once, deleted from the store by the
        worker (never on the caller's thread: the event loop's)."""
        with self._held_lock:
            leases = self._held.get(key)
            if leases is None or lease not in leases:
                return
            leases.discard(lease)
            if not leases:
                del self._held[key]
        self._give_back([(key, lease)])
        self._start()

    def held_for(self, key: str) -> int:
        """Leases of ``key`` this replica holds in the store."""
        with self._held_lock:
            return len(self._held.get(key, ()))

    def held_here(self) -> int:
        """Leases this replica holds (given back ones excluded)."""
        with self._held_lock:
            return sum(len(leases) for leases in self._held.values())

    def releasing(self) -> int:
        """Releases not yet confirmed by the store."""
        with self._held_lock:
            return len(self._releasing)

    def renew_now(self) -> None:
        """Renew every lease this replica holds (the worker does so every lease_s / 3)."""
        with self._held_lock:
            held = [(key, lease) for key, leases in self._held.items() for lease in leases]
        if held:
            self._guarded(lambda: self._renew(held))

    def flush_releases(self) -> None:
        """Delete the given-back leases from the store, all in one round trip."""
        now = time.monotonic()
        with self._held_lock:
            moot = [pair for pair, until in self._releasing.items() if until <= now]
            for pair in moot:
                del self._releasing[pair]
            self.releases_expired += len(moot)
            batch = list(self._releasing)
        if not batch:
            return
        try:
            self._release(batch)
        except self._errors as exc:
            self._failed(exc)  # kept: tried again at the next round
            return
        with self._held_lock:
            for pair in batch:
                self._releasing.pop(pair, None)
        self._ok()

    def close(self, timeout: float = 5.0) -> None:
        """Give back every lease still held (the process is going away), stop the worker
        and close the connections. A later take starts again (a lifespan may rerun)."""
        with self._held_lock:
            worker, self._worker = self._worker, None
            pairs = [(key, lease) for key, leases in self._held.items() for lease in leases]
            self._held.clear()
        self._give_back(pairs)
        if worker is not None:
            self._stop.set()
            self._wake.set()
            worker.join(timeout)
        self._run(self.flush_releases)  # on this thread, once more
        self._dispose()

    def _give_back(self, pairs: list[Pair]) -> None:
        if not pairs:
            return
        until = time.monotonic() + self.lease_s
        with self._held_lock:
            for pair in pairs:
                self._releasing[pair] = until
        self._wake.set()

    def _start(self) -> None:
        with self._held_lock:
            if self._worker is not None:
                return
            self._stop = stop = threading.Event()
            worker = self._worker = threading.Thread(
                target=self._work, args=(stop,), name="cachegate-slot-leases", daemon=True
            )
        try:
            worker.start()
        except RuntimeError:  # no thread to be had: the next call tries again
            log.exception("the in-flight lease worker did not start")
            with self._held_lock:
                self._worker = None

    def _work(self, stop: threading.Event) -> None:
        """Releases as they come (batched), renewals every lease_s / 3."""
        next_renewal = time.monotonic() + self.lease_s / 3
        while not stop.is_set():
            self._wake.wait(max(0.0, next_renewal - time.monotonic()))
            self._wake.clear()
            self._run(self.flush_releases)
            if time.monotonic() >= next_renewal:
                self._run(self.renew_now)
                next_renewal = time.monotonic() + self.lease_s / 3

    @staticmethod
    def _run(job: Callable[[], object]) -> None:
        try:
            job()
        except Exception:  # the worker must outlive any one call's error
            log.exception("a shared in-flight lease call failed")

    def _acquire(self, key: str, cap: int, lease: str) -> Taken:
        raise NotImplementedError

    def _release(self, pairs: list[Pair]) -> None:
        raise NotImplementedError

    def _renew(self, pairs: list[Pair]) -> Taken:
        raise NotImplementedError

    def _dispose(self) -> None:
        raise NotImplementedError


class SlotStoreCollector:
    """The store's breaker, read at scrape time: ``cachegate_concurrency_store_*``."""

    def __init__(self, store: SlotStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        labels = [self.store.name]
        failures = CounterMetricFamily(
            "cachegate_concurrency_store_failures",
            "Calls to the shared in-flight slot store (Redis or PostgreSQL) that failed",
            labels=["store"],
        )
        failures.add_metric(labels, self.store.failures)
        opened = GaugeMetricFamily(
            "cachegate_concurrency_store_open",
            "1 while the in-flight slot store's circuit breaker is open: each replica "
            "counts max_concurrent_requests on its own",
            labels=["store"],
        )
        opened.add_metric(labels, 1.0 if self.store.is_open else 0.0)
        expired = CounterMetricFamily(
            "cachegate_concurrency_store_releases_expired",
            "Leases given back that the store could not be told of before they expired "
            "(it was away): each held its tenant's slot until then",
            labels=["store"],
        )
        expired.add_metric(labels, self.store.releases_expired)
        yield from (failures, opened, expired)
