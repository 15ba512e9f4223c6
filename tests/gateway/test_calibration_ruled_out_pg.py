"""The ruled-out floors (gateway/calibration_ruled_out.py) on real PostgreSQL, where
replicas write at once: concurrent saves of one key keep the highest floor (an insert
race is retried as an update), and deleting the tenant through the admin service
deletes its floors, not another tenant's."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import create_engine

from gateway.admin.service import TenantAdmin
from gateway.calibration_ruled_out import labels_mark, load_ruled_out, save_ruled_out
from gateway.tenants import TenantStore
from migrations.runner import upgrade_database
from tests.gateway.conftest import PG_SERVER_URL

pytestmark = [pytest.mark.postgres]


def test_floors_on_postgres_keep_the_highest_and_go_with_the_tenant(pg_schema: str) -> None:
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    db = create_engine(url, pool_size=10)
    store = TenantStore(db)
    admin = TenantAdmin(store, None, None)
    for tenant in ("acme", "other"):
        admin.add_tenant("tests", tenant, None)
    floors = [0.9 + i / 1000 for i in range(16)]
    mark = labels_mark(db, "acme")
    start = threading.Barrier(len(floors))
    failures: list[BaseException] = []

    def save(floor: float) -> None:
        start.wait(5)
        try:
            save_ruled_out(db, "acme", 0.01, ["en-1", "zh-1"], floor, mark)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=save, args=(f,)) for f in floors]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures
    assert load_ruled_out(db, "acme", 0.01, ["zh-1", "en-1"]) == max(floors)
    save_ruled_out(db, "other", 0.01, ["en-1", "zh-1"], 0.95, labels_mark(db, "other"))
    admin.delete("tests", "acme")
    assert load_ruled_out(db, "acme", 0.01, ["en-1", "zh-1"]) == 0.0
    assert load_ruled_out(db, "other", 0.01, ["en-1", "zh-1"]) == 0.95  # the control
    db.dispose()


def test_labels_past_the_windows_are_weighed_on_postgres(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read windows and the row-by-row sum of the labels above them (a server-side
    cursor on PostgreSQL) give the rate over every label, as on SQLite
    (tests/gateway/test_calibration_weights.py)."""
    import math
    import random

    from sqlalchemy.orm import Session

    import gateway.calibration_labels as calibration_labels
    from gateway.models import MisfireSample
    from gateway.tenants import utc_now

    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    db = create_engine(url)
    TenantAdmin(TenantStore(db), None, None).add_tenant("admin", "t", None)
    monkeypatch.setattr(calibration_labels, "MAX_SAMPLES", 50)
    rng = random.Random(7)
    drawn = [(0.9 + 0.1 * rng.random(), 1.0 if i < 300 else 0.01) for i in range(400)]
    now = utc_now()
    with Session(db) as s, s.begin():
        for score, p in drawn:
            s.add(MisfireSample(
                tenant_id="t", created_at=now, request_id="r", entry_id=None,
                partition_key="p", question="q", matched_question="m", served_answer="a",
                score=0.95, threshold=0.8, verifier_score=score, labeled_at=now,
                label="misfire" if score < 0.91 else "correct",
                entity_comparison={"sampling": {"probability": p}},
            ))  # fmt: skip
    truth = math.fsum(1 / p for x, p in drawn if x < 0.91) / math.fsum(1 / p for _, p in drawn)
    labels = calibration_labels.load_labels(db, "t")
    rate = math.fsum(x.weight for x in labels if x.misfire) / math.fsum(x.weight for x in labels)
    assert len(labels) < 100
    assert rate == pytest.approx(truth, rel=1e-9)
    db.dispose()
