"""Starts and stops the operations side of the gateway with the app's lifespan:
the request statistics writer, the engine snapshotter (in-process engine only)
and the misfire sampler (with shadow verification when the settings ask)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from gateway.reports.recorder import EngineSnapshotter, StatsRecorder, pool_snapshot
from gateway.review.sampling import MisfireSampler
from gateway.settings import Settings
from gateway.state import GatewayState


@dataclass
class Operations:
    stats: StatsRecorder
    review: MisfireSampler
    snapshots: EngineSnapshotter | None

    async def aclose(self) -> None:
        await self.review.aclose()
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
    return Operations(stats, review, snapshots)
