"""Admin cache operations on one tenant: list and invalidate its semantic entries
(all, one partition, one entry), and its cache counters.

Invalidation is always narrowed to the tenant: a partition key or an entry id
that belongs to another tenant removes nothing and answers 404, so a tenant's
route can never reach another tenant's entries.

The counters come from this replica's Prometheus registry (the gateway's
``cachegate_*`` series, labelled by tenant) since the replica started; the
semantic entry counts come from the database and are global.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from sqlalchemy import distinct, func, select
from sqlalchemy.orm import Session

from gateway.admin import audit
from gateway.admin.schemas import (
    CacheEntryOut,
    CacheStats,
    InvalidateResult,
    PrefixStats,
    SemanticStats,
    named,
)
from gateway.errors import NotFoundError, ServiceUnavailableError
from gateway.metrics import GatewayMetrics
from gateway.models import Tenant
from gateway.proxy.ratelimit import RateLimiter
from gateway.tenants import DB_UNAVAILABLE, TenantStore
from semantic import SemanticCache
from semantic.errors import EntryNotFoundError, StoreUnavailableError
from semantic.models import SemanticEntry
from semantic.store_rows import SemanticRows

Scope = Literal["all", "partition", "entry"]


@contextmanager
def store_errors() -> Iterator[None]:
    """A semantic store outage is a 503 here, never a 500."""
    try:
        yield
    except StoreUnavailableError as exc:
        # The cause names the database URL: it stays in the exception chain (logs), never
        # in the error body.
        raise ServiceUnavailableError("the semantic store is unavailable") from exc
    except DB_UNAVAILABLE as exc:  # a pool with no free connection in time included
        raise ServiceUnavailableError("the semantic store is unavailable") from exc


def require_tenant(store: TenantStore, tenant_id: str) -> Tenant:
    tenant = store.get_tenant(tenant_id)
    if tenant is None:
        raise NotFoundError(
            f"no such tenant: {named(tenant_id)}", param="tenant_id", code="tenant_not_found"
        )
    return tenant


def tenant_counters(metrics: GatewayMetrics, tenant_id: str) -> dict[str, dict[str, float]]:
    """``{sample name: {label values joined by ',' (or ''): value}}`` of the tenant's
    counters, read without creating any labelled child."""
    out: dict[str, dict[str, float]] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.labels.get("tenant") != metrics.label(tenant_id):
                continue
            if not sample.name.endswith("_total"):
                continue
            rest = ",".join(v for k, v in sorted(sample.labels.items()) if k != "tenant")
            bucket = out.setdefault(sample.name, {})
            bucket[rest] = bucket.get(rest, 0.0) + sample.value
    return out


class CacheAdmin:
    def __init__(
        self,
        store: TenantStore,
        cache: SemanticCache | None,
        metrics: GatewayMetrics,
        limiter: RateLimiter | None,
        *,
        rows: SemanticRows | None = None,
    ) -> None:
        """``rows``: where the semantic layer is off on this replica, its rows all the
        same (semantic/store_rows.py): invalidations fence and delete them."""
        self.store = store
        self.cache = cache
        self.rows: SemanticRows | None = cache if cache is not None else rows
        self.metrics = metrics
        self.limiter = limiter
        self.audit = audit.AuditLog(store.sessions)

    def _session(self) -> Session:
        assert self.cache is not None
        return Session(self.cache.entries.engine)

    # ---- invalidation ------------------------------------------------------------------
    def invalidate_all(self, actor: str, tenant_id: str) -> InvalidateResult:
        return self._invalidate(
            actor, tenant_id, "all", None, lambda c: c.invalidate(tenant=tenant_id)
        )

    def invalidate_partition(self, actor: str, tenant_id: str, key: str) -> InvalidateResult:
        # partition and tenant together narrow each other: another tenant's partition
        # removes nothing.
        result = self._invalidate(
            actor,
            tenant_id,
            "partition",
            key,
            lambda c: c.invalidate(partition_key=key, tenant=tenant_id),
        )
        return result

    def invalidate_entry(self, actor: str, tenant_id: str, entry_id: int) -> InvalidateResult:
        def remove(cache: SemanticRows) -> int:
            try:
                entry = cache.get_entry(entry_id)
            except EntryNotFoundError:
                entry = None
            if entry is None or entry.tenant != tenant_id:  # never another tenant's entry
                raise NotFoundError(
                    f"{named(tenant_id)} has no semantic cache entry {entry_id}",
                    param="entry_id",
                    code="entry_not_found",
                )
            return cache.invalidate(entry_id=entry_id)

        return self._invalidate(actor, tenant_id, "entry", str(entry_id), remove)

    def _invalidate(
        self,
        actor: str,
        tenant_id: str,
        scope: Scope,
        target: str | None,
        remove: Callable[[SemanticRows], int],
    ) -> InvalidateResult:
        require_tenant(self.store, tenant_id)
        removed = 0
        if self.rows is not None:
            with store_errors():
                # First the fence, committed: a request already waiting for the model
                # must not store its answer after the delete (semantic/fences.py).
                self.rows.fence(tenant_id)
                removed = remove(self.rows)
        details = {"scope": scope, "removed": removed}
        self.audit.record(actor, audit.CACHE_INVALIDATE, tenant_id, target, details)
        return InvalidateResult(
            tenant_id=tenant_id,
            scope=scope,
            target=target,
            removed=removed,
        )

    # ---- reads -------------------------------------------------------------------------
    def entries(self, tenant_id: str, partition_key: str | None, limit: int) -> list[CacheEntryOut]:
        require_tenant(self.store, tenant_id)
        if self.cache is None:
            return []
        statement = (
            select(SemanticEntry)
            .where(SemanticEntry.tenant == tenant_id)
            .order_by(SemanticEntry.id.desc())
            .limit(limit)
        )
        if partition_key is not None:
            statement = statement.where(SemanticEntry.partition_key == partition_key)
        with store_errors(), self._session() as s:
            return [
                CacheEntryOut(
                    id=e.id,
                    partition_key=e.partition_key,
                    question=e.question,
                    created_at=e.created_at,
                    updated_at=e.updated_at,
                    expires_at=e.expires_at,
                    hit_count=e.hit_count,
                    last_hit_at=e.last_hit_at,
                )
                for e in s.scalars(statement)
            ]

    def stats(self, tenant_id: str, prefix_namespace: str) -> CacheStats:
        require_tenant(self.store, tenant_id)
        entries = partitions = 0
        if self.cache is not None:
            with store_errors(), self._session() as s:
                entries, partitions = s.execute(
                    select(func.count(), func.count(distinct(SemanticEntry.partition_key))).where(
                        SemanticEntry.tenant == tenant_id
                    )
                ).one()
        c = tenant_counters(self.metrics, tenant_id)
        query = sum(c.get("cachegate_prefix_query_tokens_total", {}).values())
        hit = sum(c.get("cachegate_prefix_hit_tokens_total", {}).values())
        return CacheStats(
            tenant_id=tenant_id,
            scope="this replica, since it started (entries and partitions: the database)",
            prefix_namespace=prefix_namespace,
            metrics_label=self.metrics.label(tenant_id),
            requests_by_cache=c.get("cachegate_requests_total", {}),
            rate_limited=(
                0
                if self.limiter is None
                else self.limiter.refused(tenant_id, self.store.namespace_id(tenant_id))
            ),
            semantic=SemanticStats(
                enabled=self.cache is not None,
                entries=int(entries),
                partitions=int(partitions),
                hits=sum(c.get("cachegate_semantic_hits_total", {}).values()),
                misses_by_reason=c.get("cachegate_semantic_misses_total", {}),
                backfills_by_result=c.get("cachegate_backfills_total", {}),
            ),
            prefix=PrefixStats(
                query_tokens=query,
                hit_tokens=hit,
                token_hit_rate=hit / query if query else None,
            ),
        )
