"""Retention of the operations tables (gateway/reports/retention.py): rows past their
days go, those within stay; a labelled sample past its days loses its texts but keeps
its score, label and sampling probability, so the verifier cut it is evidence for does
not move; 0 keeps everything. Nothing removed these rows before (a review, session 41).
Real SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, func, insert, select
from sqlalchemy.orm import Session

import gateway.reports.retention as retention
from gateway.calibration_labels import load_labels
from gateway.models import EngineSnapshot, MisfireSample, RequestStat
from gateway.reports.retention import Purged, purge
from migrations.runner import upgrade_database
from tests.gateway.conftest import PG_SERVER_URL

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ops.db'}"
    else:
        schema = request.getfixturevalue("pg_schema")
        url = f"{PG_SERVER_URL}?options=-csearch_path%3D{schema}"
    upgrade_database(url)
    engine = create_engine(url)
    yield engine
    engine.dispose()


def seed(db: Engine, days_ago: float, label: str | None, tag: str) -> None:
    at = NOW - timedelta(days=days_ago)
    comparison = {
        "sampling": {"probability": 0.5},
        "left": {"iban": ["DE89370400440532013000"], "amount": ["EUR:120"]},
    }
    with db.begin() as c:
        c.execute(
            insert(RequestStat).values(
                at=at,
                tenant_id="t",
                cache="miss",
                semantic="miss",
                prompt_tokens=1,
                cached_tokens=0,
                completion_tokens=1,
                latency_ms=1.0,
                stream=False,
            )
        )
        c.execute(
            insert(EngineSnapshot).values(
                at=at,
                blocks_total=1,
                blocks_used=0,
                blocks_cached=0,
                bytes_per_block=1,
                evictions=0,
                query_blocks=0,
                hit_blocks=0,
            )
        )
        c.execute(insert(MisfireSample).values(
            tenant_id="t", created_at=at, request_id="r", partition_key="p",
            question=f"my account 123 {tag}", matched_question=f"cached {tag}",
            served_answer=f"answer {tag}", score=0.93, threshold=0.9, verifier_score=0.99,
            verifier_model="m", label=label, entity_comparison=comparison,
            shadow_answer=f"shadow {tag}", note=label and f"note {tag}"))  # fmt: skip


def count(db: Engine, table: type) -> int:
    with Session(db) as s:
        return int(s.scalar(select(func.count()).select_from(table)) or 0)


def test_old_rows_go_and_labelled_samples_keep_their_evidence(
    db: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "BATCH", 2)  # several batches
    for i in range(3):
        seed(db, 100, None, f"old-unlabelled-{i}")
        seed(db, 100, "misfire", f"old-labelled-{i}")
        seed(db, 10, None, f"new-{i}")  # the control: within the days
    before = load_labels(db, "t", ["m"])
    assert purge(db, 0, 0, NOW) == Purged()  # 0: kept for ever
    assert count(db, RequestStat) == 9
    done = purge(db, 90, 90, NOW)
    assert done == Purged(stats=6, snapshots=6, samples_deleted=3, samples_blanked=3)
    assert count(db, RequestStat) == count(db, EngineSnapshot) == 3
    with Session(db) as s:
        rows = s.scalars(select(MisfireSample).order_by(MisfireSample.id)).all()
        texts = " ".join(
            f"{r.question} {r.matched_question} {r.served_answer} {r.shadow_answer} {r.note} "
            f"{r.entity_comparison}"
            for r in rows
        )
        assert "old-" not in texts and "new-0" in texts
        old = [r for r in rows if r.question == ""]
        assert old and all(r.entity_comparison == {"sampling": {"probability": 0.5}} for r in old)
        assert "DE89" in texts  # the control: the new samples keep their entities
        labelled = [r for r in rows if r.label is not None]
        assert len(labelled) == 3 and all(r.verifier_score == 0.99 for r in labelled)
    assert load_labels(db, "t", ["m"]) == before  # the cut's evidence is as it was
    assert purge(db, 90, 90, NOW) == Purged()  # nothing left to do
