"""Prometheus metrics of the gateway, per tenant and per layer, in the app's own registry.

``/metrics`` renders this registry and, when the engine runs in-process, the
engine's own (``prefix_*``) beside it.

The ``tenant`` label is, by default, a stable keyed digest of the tenant id
(:func:`tenant_label`, an HMAC under a server secret all replicas share): whoever
can read ``/metrics`` learns how busy each tenant is, not who the tenants are, and
cannot confirm a guessed id (tenant ids are often readable slugs) by hashing it.
An operator finds a tenant's label in its admin stats (``metrics_label``); one who
wants the ids (and keeps ``/metrics`` private) sets
``CACHEGATE_METRICS_TENANT_LABELS=id``. The series names and label names stay the
same either way (dashboards and alerts use them).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from gateway.calibrator import Calibrator
    from gateway.sync.feed import ChangeFeed

TenantLabels = Literal["digest", "id"]


def tenant_label(tenant_id: str, mode: TenantLabels = "digest", key: str = "") -> str:
    """The ``tenant`` label value: ``t-`` and 12 hex digits of HMAC-SHA-256 of the id
    under ``key`` (the app's shared server secret, so the label is stable across
    replicas and restarts and a dashboard follows one tenant), or the id itself. With
    no key (a bare registry in a unit test) the digest is unkeyed."""
    if mode == "id":
        return tenant_id
    data = tenant_id.encode("utf-8")
    mac = hmac.new(key.encode(), data, hashlib.sha256) if key else hashlib.sha256(data)
    return "t-" + mac.hexdigest()[:12]


class _TenantLabelled:
    """A labelled metric whose first label (``tenant``) goes through :func:`tenant_label`,
    so no caller can put a raw tenant id on a series by forgetting to."""

    def __init__(self, metric: Any, mode: TenantLabels, key: str) -> None:
        self._metric, self._mode, self._key = metric, mode, key

    def labels(self, tenant: str, *rest: str) -> Any:
        return self._metric.labels(tenant_label(tenant, self._mode, self._key), *rest)

    def forget(self, tenant: str) -> None:
        """Remove every series of ``tenant``: ``remove_by_labels`` where the installed
        prometheus_client has it (recent releases); before it, removal was by full label
        values only, so the children are listed from ``_metrics`` under its ``_lock``."""
        label = tenant_label(tenant, self._mode, self._key)
        if hasattr(self._metric, "remove_by_labels"):
            self._metric.remove_by_labels({"tenant": label})
            return
        with self._metric._lock:
            keys = [key for key in self._metric._metrics if key[0] == label]
        for key in keys:
            with contextlib.suppress(KeyError):  # removed meanwhile by another thread
                self._metric.remove(*key)


LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class GatewayMetrics:
    def __init__(self, tenant_labels: TenantLabels = "id", label_key: str = "") -> None:
        # The app passes the setting (default "digest") and the shared label key; a bare
        # instance (unit tests) labels series with what it is given.
        self.tenant_labels = tenant_labels
        self.label_key = label_key
        self.registry = r = CollectorRegistry()
        self.requests = Counter(
            "cachegate_requests",
            "Requests by tenant and outcome",
            ["tenant", "cache"],
            registry=r,
        )
        self.semantic_hits = Counter(
            "cachegate_semantic_hits",
            "Requests answered from the semantic cache",
            ["tenant"],
            registry=r,
        )
        self.semantic_misses = Counter(
            "cachegate_semantic_misses",
            "Semantic lookups that missed, by reason",
            ["tenant", "reason"],
            registry=r,
        )
        self.verifier_unread = Counter(
            "cachegate_verifier_unread",
            "verifier_refused misses whose best candidate the verifier refused without"
            " reading it, by why (language_mismatch, too_many_tokens, ...)",
            ["tenant", "reason"],
            registry=r,
        )
        self.validator_rejections = Counter(
            "cachegate_validator_rejections",
            "Candidates above the threshold refused by a validator, by kind",
            ["tenant", "kind"],
            registry=r,
        )
        self.prefix_query_tokens = Counter(
            "cachegate_prefix_query_tokens",
            "Prompt tokens sent to the prefix engine",
            ["tenant"],
            registry=r,
        )
        self.prefix_hit_tokens = Counter(
            "cachegate_prefix_hit_tokens",
            "Prompt tokens reused from the prefix cache",
            ["tenant"],
            registry=r,
        )
        self.ttft = Histogram(
            "cachegate_time_to_first_token_seconds",
            "Time to the first answer byte",
            ["tenant", "layer"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.latency = Histogram(
            "cachegate_request_latency_seconds",
            "Whole request latency",
            ["tenant", "layer"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        # Clients that left before their response ended (the access line's
        # outcome=client_disconnected, gateway/request_log.py): what still ran for them
        # upstream was aborted; not upstream errors, and not in cachegate_requests.
        self.client_disconnects = Counter(
            "cachegate_client_disconnects",
            "Requests whose client disconnected before the response ended",
            ["tenant"],
            registry=r,
        )
        # Requests refused for the tenant's max_concurrent_requests (its rpm refusals are
        # the rate limiter's, gateway/proxy/ratelimit.py).
        self.concurrency_refused = Counter(
            "cachegate_concurrency_refused",
            "Requests refused because the tenant had max_concurrent_requests in flight",
            ["tenant"],
            registry=r,
        )
        self.upstream_errors = Counter(
            "cachegate_upstream_errors", "Upstream failures by kind", ["kind"], registry=r
        )
        # Engine replicas (gateway/proxy/engine_pool.py): tries sent to each, and how often a
        # request left one for the next replica on its hash-ring preference list.
        self.upstream_requests = Counter(
            "cachegate_upstream_requests",
            "Tries sent to each engine replica",
            ["replica"],
            registry=r,
        )
        self.upstream_failovers = Counter(
            "cachegate_upstream_failovers",
            "Requests that failed over away from an engine replica",
            ["replica"],
            registry=r,
        )
        self.backfills = Counter(
            "cachegate_backfills", "Semantic backfills by result", ["tenant", "result"], registry=r
        )
        self.store_unavailable = Counter(
            "cachegate_semantic_store_unavailable",
            "Requests served without the semantic layer because the database was down",
            registry=r,
        )
        # Where lookups were decided (gateway/proxy/pipeline.py): "memory" on the event loop
        # (a repeated question, everything kept), "thread" in a lookup thread.
        self.semantic_lookups = Counter(
            "cachegate_semantic_lookups",
            "Semantic lookups by where they were decided (memory or thread)",
            ["path"],
            registry=r,
        )
        # Entries of an earlier embedder carried over when their partition was next asked
        # for (semantic/migrate.py), by what became of each old row.
        self.semantic_migrated = Counter(
            "cachegate_semantic_migrated_entries",
            "Entries of an earlier embedder carried over to the current one, by outcome",
            ["outcome"],
            registry=r,
        )

        # Review labels (gateway/review/api.py): the misfire-rate alert reads their ratio.
        self.misfire_labels = Counter(
            "cachegate_misfire_labels",
            "Review labels given to sampled semantic hits (correct or misfire)",
            ["tenant", "label"],
            registry=r,
        )
        # The same labels weighted by 1 / the probability their hit was sampled with, as
        # the misfire report weights them: hits in a band sampled 4x as often would
        # otherwise count 4x in the alert's rate (a review, session 44).
        self.misfire_labels_weighted = Counter(
            "cachegate_misfire_labels_weighted",
            "Review labels weighted by 1 / their hit's sampling probability (1 when unknown)",
            ["tenant", "label"],
            registry=r,
        )
        # A relabel's earlier label, withdrawn (plain and weighted): the alert subtracts them,
        # so a misclick corrected counts once, as the report counts it (before session 46
        # every POST counted, a correction too: one misfire corrected among 20 labels
        # paged as 4.5%). The same label again counts nothing.
        self.misfire_labels_withdrawn = Counter(
            "cachegate_misfire_labels_withdrawn",
            "Review labels replaced by a relabel (the earlier label)",
            ["tenant", "label"],
            registry=r,
        )
        self.misfire_labels_withdrawn_weighted = Counter(
            "cachegate_misfire_labels_withdrawn_weighted",
            "Review labels replaced by a relabel, weighted as cachegate_misfire_labels_weighted",
            ["tenant", "label"],
            registry=r,
        )
        # Each labelled tenant's own bound, which the misfire-rate alert compares with
        # (before session 47 it paged every tenant at a fixed 1%: one that had set 5%
        # was paged at 3%, one at 0.5% never below 1%). Set when a label is counted on
        # this replica and again whenever the tenant's policy changes on any replica.
        self.misfire_target = Gauge(
            "cachegate_misfire_target_rate",
            "The target_misfire_rate of each tenant labelled on this replica",
            ["tenant"],
            registry=r,
        )
        self._targeted: set[str] = set()  # tenants with a target series here
        self._minted: dict[str, str] = {}  # tenant id -> the namespace its series count
        self.target_changes = 0  # policy changes followed: a label's read older than one is redone
        # Per finished request, by the misfire report's formulas (gateway/saved_metrics.py).
        self.prefill_flops_saved = Counter(
            "cachegate_prefill_flops_saved",
            "Prefill FLOPs not spent thanks to the caches (in-process engine only)",
            ["tenant", "layer"],
            registry=r,
        )
        self.cost_saved_usd = Counter(
            "cachegate_cost_saved_usd",
            "Dollars not spent on reused prompt tokens and semantic-hit completions",
            ["tenant", "layer"],
            registry=r,
        )

        self._tenant_metrics = (
            "misfire_labels",
            "misfire_labels_weighted",
            "misfire_labels_withdrawn",
            "misfire_labels_withdrawn_weighted",
            "misfire_target",
            "prefill_flops_saved",
            "cost_saved_usd",
            "requests",
            "semantic_hits",
            "semantic_misses",
            "validator_rejections",
            "verifier_unread",
            "prefix_query_tokens",
            "prefix_hit_tokens",
            "ttft",
            "latency",
            "backfills",
            "client_disconnects",
            "concurrency_refused",
        )
        for name in self._tenant_metrics:
            setattr(self, name, _TenantLabelled(getattr(self, name), tenant_labels, label_key))

    def forget_tenant(self, tenant_id: str) -> None:
        """Drop a deleted tenant's series: a tenant created again under its id starts
        from zero (its cache stats too), and tenants that come and go do not grow
        /metrics for good. A scrape sees the counters end, as after a restart."""
        for name in self._tenant_metrics:
            getattr(self, name).forget(tenant_id)
        self._targeted.discard(tenant_id)
        self._minted.pop(tenant_id, None)

    def saw(self, tenant_id: str, namespace_id: str) -> None:
        """A request of ``tenant_id`` authenticated: its series are of the tenant minted
        ``namespace_id`` (the first one seen until they are forgotten), so a tenant
        deleted and created again under its id is told apart (:meth:`forget_deleted`)."""
        if namespace_id and tenant_id not in self._minted:
            self._minted[tenant_id] = namespace_id

    def set_misfire_target(self, tenant_id: str, target: float, read_at: int | None = None) -> bool:
        """Export the tenant's ``target_misfire_rate`` (a label was counted for it); with
        ``read_at`` (:attr:`target_changes` before ``target`` was read), only when no
        policy change was followed since, else False: read it again (a change applied
        between the read and this set was overwritten by the older value: the diff
        review of session 47)."""
        if read_at is not None and read_at != self.target_changes:
            return False
        self.misfire_target.labels(tenant_id).set(target)
        self._targeted.add(tenant_id)
        return True

    def follow_targets(
        self, changed: Collection[str], target_of: Callable[[str], float | None]
    ) -> None:
        """The change feed's callback: the tenants among ``changed`` whose target this
        replica exports get it again; every such tenant after a rebuild, which names
        none (``target_of``: None for a tenant gone, whose series
        :meth:`forget_deleted` drops). One that cannot be read keeps its value."""
        self.target_changes += 1
        for tenant_id in [t for t in (changed or list(self._targeted)) if t in self._targeted]:
            try:
                target = target_of(tenant_id)
            except Exception:  # the database away: the next change or label sets it
                continue
            if target is not None and tenant_id in self._targeted:
                self.misfire_target.labels(tenant_id).set(target)

    def forget_deleted(self, changed: Collection[str], namespace_id: Callable[[str], str]) -> None:
        """The change feed's callback: forget the tenants among ``changed`` that no
        longer exist (deleted through any replica) or exist as another tenant (created
        again under the id before this replica heard of the delete: since session 50,
        whose review found the old tenant's counts in the new one's stats). A rebuild
        names none: labels are digests, so series of tenants this replica cannot name
        stay."""
        for tenant_id in changed:
            current = namespace_id(tenant_id)
            minted = self._minted.get(tenant_id)
            if not current or (minted is not None and minted != current):
                self.forget_tenant(tenant_id)

    def watch_feed(self, feed: ChangeFeed) -> None:
        """Export ``cachegate_replica_sync_lag_seconds`` (and ``_gaps``) for ``feed``, read
        at scrape time so the lag keeps growing while the feed is stuck (a value set by
        the feed itself would freeze exactly when the feed stops). Registered only here:
        no feed, no series."""
        watched = time.monotonic()

        def lag() -> float:
            seconds = feed.stats()["lag"]
            # Never caught up yet (database down at start): behind since it was watched.
            return float(seconds) if seconds is not None else time.monotonic() - watched

        gauge = Gauge(
            "cachegate_replica_sync_lag_seconds",
            "Seconds since the change feed last caught up with cache_changes",
            registry=self.registry,
        )
        gauge.set_function(lag)
        gaps = Gauge(
            "cachegate_replica_sync_gaps",
            "Change-log seqs below the feed's position still awaited (transactions that "
            "took a seq and have not committed yet, or rolled back)",
            registry=self.registry,
        )
        gaps.set_function(lambda: float(feed.stats()["gaps"]))

    def watch_calibrator(self, calibrator: Calibrator) -> None:
        """Export ``cachegate_verifier_calibration_database_away`` (1 while tenants' verifier
        cuts cannot be read from the database: known cuts kept, 1.0 where none is known),
        read at scrape time. Registered only with the verifier on."""
        gauge = Gauge(
            "cachegate_verifier_calibration_database_away",
            "1 while tenant verifier cuts cannot be read from the database (kept or 1.0)",
            registry=self.registry,
        )
        gauge.set_function(lambda: float(calibrator.is_database_away))

    def label(self, tenant_id: str) -> str:
        """The ``tenant`` label this registry gives ``tenant_id``."""
        return tenant_label(tenant_id, self.tenant_labels, self.label_key)

    def digest(self, tenant_id: str) -> str:
        """The tenant's keyed digest whatever the label mode (the access line's)."""
        return tenant_label(tenant_id, "digest", self.label_key)

    def semantic_miss(self, tenant: str, reason: str, unread: str | None = None) -> None:
        """Count a serving miss (never a dry run's); ``unread``: why the verifier
        refused the best candidate without reading it, on a ``verifier_refused`` miss."""
        kind = reason.split(":", 1)
        self.semantic_misses.labels(tenant, kind[0]).inc()
        if unread is not None:
            self.verifier_unread.labels(tenant, unread).inc()
        if kind[0] == "entity_mismatch" and len(kind) == 2:
            self.validator_rejections.labels(tenant, kind[1]).inc()
        elif kind[0] == "judge_refused":
            self.validator_rejections.labels(tenant, "judge").inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
