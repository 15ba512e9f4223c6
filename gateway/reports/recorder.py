"""Per-request statistics and engine snapshots for the reports (seed 003, 监控指标).

``StatsRecorder.record`` is called once per finished request. It only appends
to an in-memory buffer (never blocks, never raises into the request); a
background task writes the buffer to ``request_stats`` in batches every
``flush_seconds`` (or sooner when ``batch_size`` rows are waiting). When the
database is down the batch is dropped: counted in
``cachegate_stats_dropped_total`` and logged, never retried forever. The
buffer itself is bounded; rows beyond it are dropped and counted the same way.

The recorder also keeps, per tenant, the most recent prompt texts (system
message + first user message, or the completion prompt) in a bounded ring
buffer: the input of the prefix anti-pattern finder (:mod:`gateway.reports.antipatterns`).
Prompts stay in memory only; they are never written to the database.

``EngineSnapshotter`` writes the in-process engine's block pool counters to
``engine_snapshots`` every ``interval`` seconds (cache memory over time,
evictions, block-level hit counters).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import SQLAlchemyError

from gateway.models import EngineSnapshot, RequestStat, Tenant
from gateway.tenants import utc_now

log = logging.getLogger("cachegate.gateway.stats")

PROMPTS_PER_TENANT = 200
#: Which process wrote an engine snapshot: several replicas' counters in one table were
#: read as one series (their evictions summed 5030 for a true 10; a review, session 41).
REPLICA = f"{socket.gethostname()[:40]}:{os.getpid()}"
MAX_TENANTS = 1000
PROMPT_MAX_CHARS = 16_000


@dataclass(frozen=True)
class RequestRecord:
    """One finished request, as stored in ``request_stats``."""

    tenant_id: str
    cache: str  # semantic-hit | prefix-hit | miss | bypass
    semantic: str  # the x-cachegate-semantic header value
    score: float | None
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    ttft_ms: float | None = None
    latency_ms: float = 0.0
    stream: bool = False
    at: datetime = field(default_factory=utc_now)
    # The tenant's id minted at creation, as the request authenticated (not stored): a
    # row buffered when its tenant was deleted, and perhaps re-created under the same
    # id, is dropped at write time instead of counting for the new tenant. None: not
    # checked (a record built outside a request).
    namespace_id: str | None = None
    # The semantic cache's embedder when a lookup ran: ``score`` is on its scale, and the
    # report draws only the scores of the embedder in force. None: no lookup ran.
    embedder_id: str | None = None

    def timed(self, ttft_ms: float | None, latency_ms: float, stream: bool) -> RequestRecord:
        return replace(self, ttft_ms=ttft_ms, latency_ms=latency_ms, stream=stream)

    def row(self) -> dict[str, Any]:
        values = asdict(self)
        values["semantic"] = values["semantic"][:200]
        del values["namespace_id"]
        return values


def prompt_text(body: Mapping[str, Any]) -> str | None:
    """System message(s) + the first user message, or the completion prompt; None if neither."""
    messages = body.get("messages")
    if isinstance(messages, list):
        parts: list[str] = []
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                continue
            role = message.get("role")
            if role in ("system", "developer"):
                parts.append(message["content"])
            elif role == "user":
                parts.append(message["content"])
                break
        return "\n".join(parts)[:PROMPT_MAX_CHARS] if parts else None
    prompt = body.get("prompt")
    if isinstance(prompt, str) and prompt:
        return prompt[:PROMPT_MAX_CHARS]
    return None


@dataclass
class _Ring:
    namespace_id: str | None  # the tenant's minted id the prompts came under
    texts: deque[str]


class PromptBuffer:
    """The last ``per_tenant`` prompt texts of each of at most ``max_tenants`` tenants.

    Each tenant's ring remembers the id its tenant was minted with: a tenant deleted and
    created again under its id starts with an empty ring, on this replica (``add``) and
    on others (``forget_deleted``), never with the old tenant's prompts."""

    def __init__(self, per_tenant: int = PROMPTS_PER_TENANT, max_tenants: int = MAX_TENANTS):
        self.per_tenant = per_tenant
        self.max_tenants = max_tenants
        self._data: OrderedDict[str, _Ring] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, tenant_id: str, text: str, namespace_id: str | None = None) -> None:
        with self._lock:
            ring = self._data.get(tenant_id)
            if ring is not None and namespace_id is not None and ring.namespace_id != namespace_id:
                ring = None  # another tenant under the same id: the old prompts go
            if ring is None:
                ring = _Ring(namespace_id, deque(maxlen=self.per_tenant))
                self._data[tenant_id] = ring
                self._data.move_to_end(tenant_id)
                while len(self._data) > self.max_tenants:
                    self._data.popitem(last=False)  # the least recently active tenant
            else:
                self._data.move_to_end(tenant_id)
            ring.texts.append(text)

    def recent(self, tenant_id: str) -> list[str]:
        with self._lock:
            ring = self._data.get(tenant_id)
            return list(ring.texts) if ring is not None else []

    def tenants(self) -> list[str]:
        with self._lock:
            return list(self._data)

    def forget(self, tenant_id: str) -> None:
        """Drop a tenant's prompts (call when the tenant is deleted)."""
        with self._lock:
            self._data.pop(tenant_id, None)

    def forget_deleted(self, changed: Collection[str], namespace_id: Callable[[str], str]) -> None:
        """Drop the prompts of the tenants among ``changed`` (every tenant held, when it
        is empty: the change feed lost track and names none) that no longer exist
        (``namespace_id`` gives "") or exist as another tenant (created again under the
        id before this replica heard of the delete). The change feed calls it, so a
        tenant deleted through another replica leaves no prompts behind here either."""
        with self._lock:
            held = [(t, ring.namespace_id) for t, ring in self._data.items()]
        for tenant_id, minted in held:
            if changed and tenant_id not in changed:
                continue
            current = namespace_id(tenant_id)
            if not current or (minted is not None and minted != current):
                self.forget(tenant_id)


class StatsRecorder:
    def __init__(
        self,
        db: Engine,
        registry: CollectorRegistry | None = None,
        *,
        flush_seconds: float = 2.0,
        batch_size: int = 500,
        max_buffer: int = 50_000,
        prompts: PromptBuffer | None = None,
    ) -> None:
        self.db = db
        self.flush_seconds = flush_seconds
        self.batch_size = batch_size
        self.prompts = prompts or PromptBuffer()
        self._buffer: deque[RequestRecord] = deque()
        self._max_buffer = max_buffer
        self._lock = threading.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.written = 0
        self.dropped = Counter(
            "cachegate_stats_dropped",
            "Request statistics rows dropped (database down, buffer full, tenant deleted, invalid)",
            ["reason"],
            registry=registry if registry is not None else CollectorRegistry(),
        )

    # ---- the request path ---------------------------------------------------------------
    def record(self, record: RequestRecord, body: Mapping[str, Any] | None = None) -> None:
        """Buffer one request (O(1), never raises)."""
        try:
            if body is not None:
                text = prompt_text(body)
                if text:
                    self.prompts.add(record.tenant_id, text, record.namespace_id)
            with self._lock:
                if len(self._buffer) >= self._max_buffer:
                    self.dropped.labels("buffer_full").inc()
                    return
                self._buffer.append(record)
                full = len(self._buffer) >= self.batch_size
            if full:
                self._wake.set()
        except Exception:  # statistics must never fail a request
            log.exception("could not record request statistics")

    # ---- the background writer ----------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="cachegate-stats")

    async def stop(self) -> None:
        """Stop the writer and flush what is left."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()

    async def flush(self) -> int:
        """Write everything buffered now; returns the number of rows written."""
        written = 0
        while True:
            with self._lock:
                count = min(self.batch_size, len(self._buffer))
                batch = [self._buffer.popleft() for _ in range(count)]
            if not batch:
                return written
            try:
                count = await asyncio.to_thread(self._write, batch)
            except SQLAlchemyError as exc:
                self.dropped.labels("database").inc(len(batch))
                log.warning("dropped %d request statistics rows: %s", len(batch), exc)
            except Exception as exc:  # a row the database cannot take: counted, not lost
                self.dropped.labels("invalid").inc(len(batch))
                log.warning(
                    "dropped %d request statistics rows (%s)", len(batch), type(exc).__name__
                )
            else:
                written += count
                self.written += count

    def _write(self, batch: list[RequestRecord]) -> int:
        """Insert ``batch``; the number of rows written."""
        with self.db.begin() as conn:
            # in the insert's own transaction, as misfire samples are: a delete
            # committed before it is seen, and its tenant's buffered rows go with it.
            # The rows locked (FOR SHARE on PostgreSQL) as the sampler's are: a delete
            # that began meanwhile waits for this insert, then deletes its rows too
            # (unlocked, rows committed after its sweep outlived it: a review).
            checked = {r.tenant_id for r in batch if r.namespace_id is not None}
            minted: dict[str, str] = {}
            if checked:
                found = (
                    select(Tenant.id, Tenant.namespace_id)
                    .where(Tenant.id.in_(checked))
                    .with_for_update(read=True)
                )
                minted = {tid: ns or "" for tid, ns in conn.execute(found)}
            rows = [
                r.row()
                for r in batch
                if r.namespace_id is None
                or (r.tenant_id in minted and minted[r.tenant_id] == r.namespace_id)
            ]
            if len(rows) < len(batch):
                self.dropped.labels("tenant_deleted").inc(len(batch) - len(rows))
            if rows:
                conn.execute(insert(RequestStat), rows)
            return len(rows)

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.flush_seconds)
            self._wake.clear()
            try:
                await self.flush()
            except Exception:  # keep the writer alive whatever happens
                log.exception("request statistics writer failed")


# ---- engine snapshots ---------------------------------------------------------------------


def pool_snapshot(engine: Any) -> dict[str, int]:
    """The counters of a :class:`prefix.serve.engine.PrefixEngine`'s block pool, read without
    its lock (plain attribute reads; a snapshot may be off by one in-flight step)."""
    pool = engine.pool
    return {
        "blocks_total": int(pool.num_blocks),
        "blocks_used": int(pool.num_used_blocks),
        "blocks_cached": int(pool.num_cached_blocks),
        "bytes_per_block": int(engine.kv_cache.bytes_per_block),
        "evictions": int(pool.num_evictions),
        "query_blocks": int(pool.num_queries),
        "hit_blocks": int(pool.num_hit_blocks),
    }


class EngineSnapshotter:
    """Writes ``source()`` to ``engine_snapshots`` now and every ``interval`` seconds."""

    def __init__(self, db: Engine, source: Callable[[], dict[str, int]], interval: float) -> None:
        self.db = db
        self.source = source
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self.failures = 0

    def start(self) -> None:
        if self._task is None and self.interval > 0:
            self._task = asyncio.create_task(self._run(), name="cachegate-engine-snapshots")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def snapshot(self) -> bool:
        """Take one snapshot now; False (logged) when it could not be written."""
        try:
            values = self.source()
            await asyncio.to_thread(self._write, values)
        except Exception as exc:
            self.failures += 1
            log.warning("engine snapshot not written: %s", exc)
            return False
        return True

    def _write(self, values: dict[str, int]) -> None:
        with self.db.begin() as conn:
            row = {"at": utc_now(), "replica": REPLICA, **values}
            conn.execute(insert(EngineSnapshot), [row])

    async def _run(self) -> None:
        while True:
            await self.snapshot()
            await asyncio.sleep(self.interval)
