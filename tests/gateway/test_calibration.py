"""A tenant's target misfire rate turned into the verifier cut (gateway/calibration.py):
the shipped cut until enough labels, then raised above any range the labels disprove,
never lowered below the shipped cut; labels read from a real migrated SQLite database."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session

from gateway.calibration import MIN_LABELS, tenant_cut
from gateway.calibrator import Calibrator
from gateway.models import MisfireSample, Tenant
from gateway.reports.stats import wilson
from gateway.tenants import utc_now
from migrations.runner import upgrade_database


def labels(n_correct: int, n_misfire: int, lo: float, hi: float, seed: int = 1):
    rng = random.Random(seed)
    return [(rng.uniform(lo, hi), False) for _ in range(n_correct)] + [
        (rng.uniform(lo, hi), True) for _ in range(n_misfire)
    ]


def test_too_few_labels_keep_the_shipped_cut() -> None:
    cut = tenant_cut(labels(MIN_LABELS - 1, 0, 0.6, 1.0), 0.2, shipped_cut=0.8)
    assert (cut.source, cut.cut) == ("shipped", 0.8)
    assert cut.labelled == MIN_LABELS - 1


def test_enough_clean_labels_confirm_the_shipped_cut_and_never_lower_it() -> None:
    # 400 correct hits above the shipped cut, no misfire: Wilson upper bound 0.95% <=
    # 1%, the shipped cut is confirmed ("tenant"). 400 more below it (a looser period)
    # do not lower it: until session 21 they "proved" a cut below 0.61.
    data = labels(400, 0, 0.9, 1.0) + labels(400, 0, 0.6, 0.9, seed=2)
    cut = tenant_cut(data, 0.01, shipped_cut=0.9)
    assert (cut.source, cut.cut) == ("tenant", 0.9)
    assert cut.served == 400 and cut.misfires == 0
    assert cut.high is not None and cut.high <= 0.01
    # Positive control: the same labels cannot prove a stricter target: shipped stays.
    assert tenant_cut(data, 0.005, shipped_cut=0.9).source == "shipped"


def test_misfires_low_in_the_scores_push_the_cut_above_them() -> None:
    # Misfires all scored below 0.7, correct hits spread over 0.6..1.0.
    data = labels(600, 0, 0.6, 1.0) + labels(0, 40, 0.6, 0.7, seed=2)
    cut = tenant_cut(data, 0.01, shipped_cut=0.6)
    assert cut.source == "raised" and 0.6 < cut.cut < 0.7
    # The estimate and its interval are those of the samples the cut serves.
    assert (cut.low, cut.high) == pytest.approx(wilson(cut.misfires, cut.served))


def test_the_estimate_at_the_shipped_cut_counts_what_it_serves() -> None:
    data = [(0.95, True), (0.97, False), (0.99, False), (0.5, True)]
    cut = tenant_cut(data, 0.01, shipped_cut=0.9)
    assert (cut.source, cut.served, cut.misfires) == ("shipped", 3, 1)
    assert cut.estimate == pytest.approx(1 / 3)


def test_labels_that_disprove_the_shipped_cut_raise_it() -> None:
    # Reviewers found 20 of 100 hits at 0.99 wrong: 20% against a 1% target, Wilson
    # lower bound 13%. Nothing proves 1% (that needs 381 clean labels), but the shipped
    # cut is disproved, so it rises above those scores: nothing like them is served.
    data = [(0.99, False)] * 80 + [(0.99, True)] * 20
    cut = tenant_cut(data, 0.01, shipped_cut=0.98)
    assert (cut.source, cut.cut, cut.served) == ("raised", 0.99, 0)
    # The cut rises only as far as the misfires: 30 misfires at 0.985 and 100 clean
    # labels above them do not prove 1% (upper bound 3.7%) but do not disprove it.
    data = [(0.985, True)] * 30 + [(0.995, False)] * 100
    cut = tenant_cut(data, 0.01, shipped_cut=0.98)
    assert (cut.source, cut.cut, cut.served, cut.misfires) == ("raised", 0.985, 100, 0)
    # Positive controls: labels that do not disprove it keep the shipped cut, and
    # misfires below the shipped cut (never served by it) do not move it.
    ok = [(0.99, False)] * 99 + [(0.99, True)]
    assert tenant_cut(ok, 0.01, shipped_cut=0.98).source == "shipped"
    below = [(0.9, True)] * 40 + [(0.99, False)] * 10
    assert tenant_cut(below, 0.01, shipped_cut=0.98).cut == 0.98
    # Fewer than MIN_LABELS labels move nothing, either way.
    few = [(0.99, True)] * (MIN_LABELS - 1)
    assert tenant_cut(few, 0.01, shipped_cut=0.98).source == "shipped"


def test_a_raised_cut_serves_exactly_the_samples_it_counted() -> None:
    # 30 misfires just below 40 correct at 0.95 (5e-10 lower) disprove a 10% target:
    # the cut rises onto them and serves the 40 (upper bound 8.8%), not one misfire.
    data = [(0.95, False)] * 40 + [(0.95 - 5e-10, True)] * 30
    cut = tenant_cut(data, 0.1, shipped_cut=0.9)
    assert cut.source == "raised" and cut.cut < 0.95
    assert (cut.served, cut.misfires) == (40, 0)
    assert cut.high is not None and cut.high <= 0.1


def test_calibrator_reads_labelled_scored_samples_of_the_tenant(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    now = utc_now()
    with Session(db) as s, s.begin():
        for i in range(400):  # tenant a: clean labels from 0.6 up
            s.add(sample("a", 0.6 + 0.001 * i, "correct", now))
        s.add(sample("a", 0.99, None, now))  # pending: not a label
        s.add(sample("a", None, "misfire", now))  # no verifier score: left out
        s.add(sample("b", 0.99, "misfire", now))  # another tenant's
    calls: list[float] = []

    def shipped(target: float) -> float:
        calls.append(target)
        return 0.5

    cal = Calibrator(db, shipped, ttl=60.0)
    a = cal.refresh("a", 0.01)
    assert (a.source, a.labelled, a.misfires, a.cut) == ("tenant", 400, 0, 0.5)
    assert cal.current("a", 0.01) == a and cal.current("a", 0.02) is None
    b = cal.refresh("b", 0.01)
    assert (b.source, b.cut, b.labelled, b.misfires) == ("shipped", 0.5, 1, 1)
    cal.invalidate("a")
    assert cal.current("a", 0.01) is None and cal.current("b", 0.01) == b
    cal.refresh("a", 0.01)
    cal.invalidate()  # no tenant named (the feed after a rebuild): every cut
    assert cal.current("a", 0.01) is None and cal.current("b", 0.01) is None
    db.dispose()


def test_only_the_labels_of_the_verifier_in_force_refine_the_cut(tmp_path: Path) -> None:
    # A retrained verifier scores on another scale: labels another model's scores
    # earned (or scores of no recorded model, taken before migration 0008) say
    # nothing about today's cut.
    db = migrated(tmp_path)
    now = utc_now()
    with Session(db) as s, s.begin():
        for i in range(400):
            s.add(sample("t", 0.6 + 0.001 * i, "correct", now, model="old"))
            s.add(sample("t", 0.6 + 0.001 * i, "correct", now, model=None))
        for _ in range(10):
            s.add(sample("t", 0.99, "misfire", now, model="new"))
    old = Calibrator(db, lambda target: 0.5, verifier_models=["old"]).refresh("t", 0.01)
    assert (old.source, old.labelled) == ("tenant", 400)  # positive control: confirmed
    new = Calibrator(db, lambda target: 0.5, verifier_models=["new"]).refresh("t", 0.01)
    assert (new.labelled, new.misfires) == (10, 10) and new.cut == 0.5  # too few to move it
    fresh = Calibrator(db, lambda target: 0.5, verifier_models=["newer"]).refresh("t", 0.01)
    assert (fresh.source, fresh.cut, fresh.labelled) == ("shipped", 0.5, 0)
    db.dispose()


def test_a_broken_shipped_curve_serves_nothing(tmp_path: Path) -> None:
    def broken(target: float) -> float:
        raise ValueError("empty calibration")

    assert Calibrator(None, broken).refresh("t", 0.01).cut == 1.0
    # Nor do a tenant's labels move it: they are judged against a curve that is not
    # there (positive control: with the curve they confirm it).
    db = migrated(tmp_path)
    with Session(db) as s, s.begin():
        for i in range(400):
            s.add(sample("t", 0.6 + 0.001 * i, "correct", utc_now()))
    assert Calibrator(db, broken).refresh("t", 0.01).cut == 1.0
    assert Calibrator(db, lambda target: 0.5).refresh("t", 0.01).source == "tenant"
    db.dispose()


#: The tenants the calibration tests' samples belong to (a floor is kept only for a
#: tenant that exists: gateway/calibration_ruled_out.py).
TENANTS = ("a", "b", "c", "r", "t", "u", "x", "other")


def migrated(tmp_path: Path) -> Engine:
    """A real SQLite database at the migration head, with the tests' tenants."""
    url = f"sqlite:///{tmp_path / 'cal.db'}"
    upgrade_database(url)
    db = create_engine(url)
    now = utc_now()
    with Session(db) as s, s.begin():
        for tenant in TENANTS:
            s.add(Tenant(id=tenant, name=tenant, created_at=now, updated_at=now))
    return db


def sample(
    tenant: str, score: float | None, label: str | None, now, model: str | None = None
) -> MisfireSample:
    return MisfireSample(
        tenant_id=tenant,
        created_at=now,
        request_id="r",
        entry_id=None,
        partition_key="p",
        question="q",
        matched_question="m",
        served_answer="a",
        score=0.95,
        threshold=0.8,
        verifier_score=score,
        verifier_model=model,
        label=label,
    )
