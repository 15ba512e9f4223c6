"""How long the operations tables keep their rows, and the purge that enforces it.

``request_stats`` gains a row per request and ``engine_snapshots`` one per snapshot;
``misfire_samples`` keep the question, the cached question and the served answer of
every sampled hit: end users' text. Nothing removed them but a tenant's delete (a
review, session 41). Every ``PURGE_EVERY_S`` each replica (idempotent; batches of
:data:`BATCH` rows, so no purge holds a table for long):

- deletes request statistics and engine snapshots older than
  ``CACHEGATE_STATS_RETENTION_DAYS``;
- deletes misfire samples older than ``CACHEGATE_SAMPLE_RETENTION_DAYS`` that were never
  labelled, and blanks the texts of labelled ones (question, cached question, answer,
  shadow answer, the reviewer's note, the entities extracted from the question): their
  score, label, sampling probability and score scale stay, the evidence of the tenant's
  verifier cut (gateway/calibration_labels.py).

0 keeps rows for ever (as before).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Engine, delete, select, update

from gateway.models import EngineSnapshot, MisfireSample, RequestStat
from gateway.tenants import utc_now

log = logging.getLogger("cachegate.gateway.retention")

BATCH = 5000
PURGE_EVERY_S = 3600.0
FIRST_PURGE_S = 60.0  # after start: not in the way of the start-up itself


@dataclass(frozen=True)
class Purged:
    stats: int = 0
    snapshots: int = 0
    samples_deleted: int = 0
    samples_blanked: int = 0


def purge(db: Engine, stats_days: int, sample_days: int, now: datetime | None = None) -> Purged:
    """One pass over the three tables (see the module)."""
    now = now or utc_now()
    stats = snaps = deleted = blanked = 0
    if stats_days > 0:
        cutoff = now - timedelta(days=stats_days)
        stats = _delete_where(db, RequestStat, RequestStat.at < cutoff)
        snaps = _delete_where(db, EngineSnapshot, EngineSnapshot.at < cutoff)
    if sample_days > 0:
        cutoff = now - timedelta(days=sample_days)
        old = MisfireSample.created_at < cutoff
        deleted = _delete_where(db, MisfireSample, old & MisfireSample.label.is_(None))
        blanked = _blank(db, old & MisfireSample.label.is_not(None))
    return Purged(stats, snaps, deleted, blanked)


def _delete_where(db: Engine, table: Any, condition: ColumnElement[bool]) -> int:
    total = 0
    while True:
        ids = select(table.id).where(condition).limit(BATCH)
        with db.begin() as conn:
            done = int(conn.execute(delete(table).where(table.id.in_(ids))).rowcount)
        total += done
        if done < BATCH:
            return total


def _blank(db: Engine, condition: ColumnElement[bool]) -> int:
    """Labelled samples past the retention: their texts go (the questions, the answers,
    the reviewer's note, and the entities extracted from the question: amounts, IBANs,
    e-mails), their evidence stays (score, label, scale, sampling probability)."""
    texts = (
        (MisfireSample.question != "")
        | (MisfireSample.matched_question != "")
        | (MisfireSample.served_answer != "")
        | MisfireSample.shadow_answer.is_not(None)
        | MisfireSample.note.is_not(None)
    )
    total = 0
    while True:
        with db.begin() as conn:
            rows = conn.execute(
                select(MisfireSample.id, MisfireSample.entity_comparison)
                .where(condition & texts)
                .limit(BATCH)
            ).all()
            for sample_id, comparison in rows:
                conn.execute(
                    update(MisfireSample)
                    .where(MisfireSample.id == sample_id)
                    .values(
                        question="",
                        matched_question="",
                        served_answer="",
                        shadow_answer=None,
                        note=None,
                        entity_comparison=_evidence(comparison),
                    )
                )
        total += len(rows)
        if len(rows) < BATCH:
            return total


def _evidence(comparison: object) -> dict[str, Any] | None:
    """What the calibration reads of ``entity_comparison``: the sampling record alone."""
    if isinstance(comparison, dict) and isinstance(comparison.get("sampling"), dict):
        return {"sampling": comparison["sampling"]}
    return None


class RetentionTask:
    """Runs :func:`purge` every ``PURGE_EVERY_S`` seconds with the app's lifespan."""

    def __init__(self, db: Engine, stats_days: int, sample_days: int) -> None:
        self.db, self.stats_days, self.sample_days = db, stats_days, sample_days
        self._task: asyncio.Task[None] | None = None
        self.failures = 0

    def start(self) -> None:
        if self._task is None and (self.stats_days > 0 or self.sample_days > 0):
            self._task = asyncio.create_task(self._run(), name="cachegate-retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        await asyncio.sleep(FIRST_PURGE_S)
        while True:
            try:
                done = await asyncio.to_thread(purge, self.db, self.stats_days, self.sample_days)
                if done != Purged():
                    log.info("retention: %s", done)
            except Exception as exc:  # the database away: the next pass tries again
                self.failures += 1
                log.warning("retention purge failed: %s", type(exc).__name__)
            await asyncio.sleep(PURGE_EVERY_S)
