"""Starts and stops the operations side of the gateway with the app's lifespan:
the request statistics writer, the engine snapshotter (in-process engine only),
the misfire sampler (with shadow verification when the settings ask), the retention
purge (gateway/reports/retention.py) and, with the
verifier on, a one-off re-tag of old samples by language (gateway/review/retag.py)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from sqlalchemy import Engine

from gateway.reports.recorder import EngineSnapshotter, StatsRecorder, pool_snapshot
from gateway.reports.retention import RetentionTask
from gateway.review.retag import retag_in_background
from gateway.review.sampling import MisfireSampler
from gateway.settings import Settings
from gateway.state import GatewayState


@dataclass
class Operations:
    stats: StatsRecorder
    review: MisfireSampler
    snapshots: EngineSnapshotter | None
    retention: RetentionTask | None = None
    #: re-tagging the samples of before session 35 by language (gateway/review/retag.py)
    retag: asyncio.Task[None] | None = None
    _stop_retag: threading.Event = field(default_factory=threading.Event)

    async def aclose(self) -> None:
        if self.retag is not None:
            self._stop_retag.set()  # between two batches
            await asyncio.gather(self.retag, return_exceptions=True)
        await self.review.aclose()
        if self.retention is not None:
            await self.retention.stop()
        if self.snapshots is not None:
            await self.snapshots.stop()
        await self.stats.stop()


def start_operations(settings: Settings, gw: GatewayState, db: Engine) -> Operations:
    """Build, start and attach (``gw.stats``, ``gw.review``) the background parts."""
    registry = gw.metrics.registry
    stats = StatsRecorder(db, registry, flush_seconds=settings.stats_flush_seconds)
    cache = gw.pipeline.cache
    verification = gw.pipeline.verification
    review = MisfireSampler(
        db,
        gw.upstream,
        cache.embedder if cache is not None else None,
        shadow=settings.shadow_verification,
        min_similarity=settings.shadow_min_similarity,
        registry=registry,
        scale_of=None if verification is None else verification.verifier.scale_id_of,
    )
    snapshots = None
    engine = gw.upstream.engine
    if engine is not None:
        snapshots = EngineSnapshotter(
            db, lambda: pool_snapshot(engine), settings.engine_snapshot_seconds
        )
        snapshots.start()
    stats.start()
    gw.stats, gw.review = stats, review
    retention = RetentionTask(db, settings.stats_retention_days, settings.sample_retention_days)
    retention.start()
    ops = Operations(stats, review, snapshots, retention)
    if verification is not None:
        verifier = verification.verifier
        ops.retag = asyncio.get_running_loop().create_task(
            asyncio.to_thread(
                retag_in_background,
                db,
                verifier.legacy_scale_id,
                verifier.scale_id_of,
                ops._stop_retag,
            )
        )
    return ops
