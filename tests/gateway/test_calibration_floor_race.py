"""A verifier-cut refresh that read a tenant's labels before a delete or a relabel
committed does not save its ruled-out floor after it (gateway/calibration_ruled_out.py
``labels_mark``): before session 43 it did, and the tenant re-created under the id, or
the relabelled one, got a cut raised by labels it no longer had (a review). Positive
control: the same refresh with nothing in between keeps its floor."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session, sessionmaker

import gateway.calibrator as calibrator_module
import gateway.review.api as review_api
from gateway.admin.service import TenantAdmin
from gateway.calibration_ruled_out import load_ruled_out
from gateway.calibrator import Calibrator
from gateway.models import MisfireSample
from gateway.review.api import label_sample
from gateway.tenants import TenantStore, enforce_foreign_keys, utc_now
from migrations.runner import upgrade_database


def shipped(target: float) -> float:
    return 0.98


def seeded(tmp_path: Path) -> tuple[Any, TenantAdmin]:
    url = f"sqlite:///{tmp_path / 'floor.db'}"
    upgrade_database(url)
    db = create_engine(url)
    enforce_foreign_keys(db)
    admin = TenantAdmin(TenantStore(db), None, None)
    admin.add_tenant("admin", "t", None)
    add_labels(db, 0.99, misfires=20, correct=80)  # a range at 0.99 its labels rule out
    return db, admin


def add_labels(db: Any, score: float, misfires: int, correct: int) -> None:
    now = utc_now()
    with Session(db) as s, s.begin():
        for i in range(misfires + correct):
            s.add(MisfireSample(
                tenant_id="t", created_at=now, request_id="r", entry_id=None,
                partition_key="p", question="q", matched_question="m", served_answer="a",
                score=0.95, threshold=0.8, verifier_score=score,
                label="misfire" if i < misfires else "correct", labeled_at=now,
            ))  # fmt: skip


def refresh_with(db: Any, meanwhile: Callable[[], object] | None) -> float:
    """One refresh whose label read is followed by ``meanwhile`` (another replica's
    change, committed before this one saves); its floor as the database keeps it."""
    real = calibrator_module.load_labels

    def read_then(*args: Any) -> Any:
        labels = real(*args)
        if meanwhile is not None:
            meanwhile()
        return labels

    calibrator_module.load_labels = read_then  # type: ignore[assignment]
    try:
        raised = Calibrator(db, shipped).refresh("t", 0.01)
    finally:
        calibrator_module.load_labels = real
    assert raised.cut > 0.98  # it read the misfires either way
    return load_ruled_out(db, "t", 0.01, None)


def test_a_floor_from_labels_a_delete_removed_is_not_kept(tmp_path: Path) -> None:
    db, admin = seeded(tmp_path)
    assert refresh_with(db, lambda: admin.delete("admin", "t")) == 0.0
    admin.add_tenant("admin", "t", None)  # re-created under the id
    add_labels(db, 0.985, misfires=0, correct=60)  # its own labels, all clean
    fresh = Calibrator(db, shipped).refresh("t", 0.01)
    assert fresh.cut <= 0.985 and fresh.source != "raised"
    db.dispose()


@pytest.mark.parametrize("clock", ["in step", "behind"])
def test_a_floor_from_labels_a_relabel_changed_is_not_kept(
    tmp_path: Path, clock: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _ = seeded(tmp_path)
    sessions = sessionmaker(db)
    if clock == "behind":  # the relabelling replica's clock: the newest label stays newest
        monkeypatch.setattr(review_api, "utc_now", lambda: utc_now() - timedelta(hours=1))

    def relabel() -> None:
        with Session(db) as s:
            ids = s.scalars(select(MisfireSample.id).where(MisfireSample.label == "misfire"))
            for sample_id in list(ids):
                label_sample(sessions, sample_id, "correct", None, "admin")

    assert refresh_with(db, relabel) == 0.0
    assert Calibrator(db, shipped).refresh("t", 0.01).source != "raised"  # read afresh
    db.dispose()


@pytest.mark.parametrize("meanwhile", [None, "a new label"])
def test_the_control_keeps_its_floor_or_leaves_it_to_the_next_refresh(
    tmp_path: Path, meanwhile: str | None
) -> None:
    db, _ = seeded(tmp_path)
    if meanwhile is None:
        assert refresh_with(db, None) > 0.98  # nothing in between: kept
    else:  # labels added meanwhile: not saved from the older read, saved by the next
        assert refresh_with(db, lambda: add_labels(db, 0.5, 0, 1)) == 0.0
        Calibrator(db, shipped).refresh("t", 0.01)
        assert load_ruled_out(db, "t", 0.01, None) > 0.98
    db.dispose()
