"""A stricter ``target_misfire_rate`` never gives a lower verifier cut
(gateway/calibration.py ``tenant_cut(looser=...)``). The bands a range is tested in
are laid from each target's shipped cut, so labels between the 2% and the 1% cuts
(a tenant that tightened its target) shifted them: a range 2% had disproved fell
across two bands at 1% and was served again (a review, session 40). The real shipped
curve; labels as a calibrator reads them."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from gateway.calibration import TARGET_GRID, tenant_cut
from gateway.calibration_ruled_out import (
    forget_ruled_out,
    labels_mark,
    load_ruled_out,
    save_ruled_out,
)
from gateway.calibrator import Calibrator
from gateway.models import MisfireSample
from gateway.review.api import label_sample
from gateway.tenants import utc_now
from tests.gateway.test_calibration import migrated, sample
from validators.verifier import MODEL_DIR
from validators.verifier_calibration import cut_for

CURVE = json.loads((MODEL_DIR / "calibration.json").read_text())


def shipped(target: float) -> float:
    return float(cut_for(CURVE, target))


def looser(target: float) -> list[tuple[float, float]]:
    return [(t, shipped(t)) for t in TARGET_GRID if t > target]


def span(lo: float, hi: float, n: int) -> list[float]:
    return [lo + (hi - lo) * (i + 1) / (n + 1) for i in range(n)]


def test_tightening_the_target_keeps_a_range_the_looser_one_disproved() -> None:
    strict, loose = shipped(0.01), shipped(0.02)
    labels = [(s, False) for s in span(loose, strict, 15)]  # labelled under 2%
    labels += [(s, i in (25, 29, 30, 34)) for i, s in enumerate(span(strict, 0.9999, 135))]
    at_2 = tenant_cut(labels, 0.02, loose, looser=looser(0.02))
    at_1 = tenant_cut(labels, 0.01, strict, looser=looser(0.01))
    assert at_2.source == "raised" and at_2.misfires == 0
    assert at_1.cut >= at_2.cut and at_1.misfires == 0 and at_1.source == "raised"
    # what it was: the 1% bands split the range 2 + 2, and its 4 misfires were served
    alone = tenant_cut(labels, 0.01, strict)
    assert alone.cut < at_2.cut and alone.misfires == 4
    # the control: the same labels without the misfires are served at the shipped cut
    clean = [(s, False) for s, _ in labels]
    assert tenant_cut(clean, 0.01, strict, looser=looser(0.01)).source != "raised"


def test_the_cut_never_falls_as_the_target_tightens() -> None:
    rng = random.Random(40)
    for _ in range(40):
        rate = rng.choice([0.005, 0.02, 0.05])
        labels = [(rng.uniform(0.3, 1.0), rng.random() < rate) for _ in range(rng.randint(60, 400))]
        cuts = [tenant_cut(labels, t, shipped(t), looser=looser(t)).cut for t in TARGET_GRID]
        assert cuts == sorted(cuts, reverse=True), cuts


def backlog_case() -> tuple[list[tuple[float, bool]], list[tuple[float, bool]]]:
    """(day 1's labels: a range with 3 misfires above the 1% cut, clean labels above it;
    day 2's: clean labels of older samples, just below that range)."""
    strict = shipped(0.01)
    bad = span(strict + 1e-5, strict + 0.004, 30)
    day_1 = [(s, i in (10, 16, 20)) for i, s in enumerate(bad)]
    day_1 += [(s, False) for s in span(strict + 0.0041, 0.9999, 200)]
    return day_1, [(s, False) for s in span(strict, strict + 1e-5, 15)]


def test_labels_of_a_review_backlog_below_a_disproved_range_keep_it_cut_off() -> None:
    """From labels alone the backlog shifts the bands and the range is served again;
    with the floor the first labels set (``kept``: what the Calibrator keeps, in memory
    and in the database) it stays cut off."""
    strict = shipped(0.01)
    day_1, backlog = backlog_case()
    raised = tenant_cut(day_1, 0.01, strict, looser=looser(0.01))
    assert raised.source == "raised" and raised.misfires == 0  # the control
    alone = tenant_cut(day_1 + backlog, 0.01, strict, looser=looser(0.01))
    assert alone.cut < raised.cut and alone.misfires > 0  # why the floor is kept
    again = tenant_cut(day_1 + backlog, 0.01, strict, looser=looser(0.01), kept=raised.band_cut)
    assert again.cut >= raised.cut and again.misfires == 0


def seed_day_1(db: Any) -> None:
    now = utc_now()
    day_1, _ = backlog_case()
    with Session(db) as s, s.begin():
        for score, misfire in day_1:
            s.add(sample("t", score, "misfire" if misfire else "correct", now, "m"))


def add_backlog(db: Any) -> None:
    now = utc_now()
    _, backlog = backlog_case()
    with Session(db) as s, s.begin():  # day 2: older samples, labelled now
        for score, _ in backlog:
            s.add(sample("t", score, "correct", now, "m"))


def test_a_calibrator_keeps_a_ruled_out_range_cut_off_through_a_review_backlog(
    tmp_path: Path,
) -> None:
    """The case above through the gateway's Calibrator, which keeps the floor in memory
    and in the database: the backlog labelled on day 2 does not re-serve the range, not
    after a policy change (the cut is read afresh), not on a replica started since."""
    db = migrated(tmp_path)
    seed_day_1(db)
    cal = Calibrator(db, shipped, verifier_models=["m"])
    raised = cal.refresh("t", 0.01)
    assert raised.source == "raised" and raised.misfires == 0  # the control
    add_backlog(db)
    again = cal.refresh("t", 0.01)
    assert again.cut >= raised.cut and again.misfires == 0
    assert "band_cut" not in again.to_dict()  # the report's shape is as it was
    cal.invalidate("t")  # a policy change: its labels are read afresh, the floor too
    assert cal.refresh("t", 0.01).cut >= raised.cut
    restarted = Calibrator(db, shipped, verifier_models=["m"])  # before: served again
    assert restarted.refresh("t", 0.01).cut >= raised.cut
    # the floor is per score scale: another verifier's labels read none of it
    assert load_ruled_out(db, "t", 0.01, ["m"]) == raised.band_cut
    assert load_ruled_out(db, "t", 0.01, ["other"]) == 0.0
    assert load_ruled_out(db, "t", 0.02, ["m"]) == 0.0


def test_a_relabel_deletes_the_floor_and_the_labels_decide_afresh(tmp_path: Path) -> None:
    """The floor holds while the labels stay; a sample relabelled (a reviewer's mistake
    undone) deletes it, and the cut is what the labels now give."""
    db = migrated(tmp_path)
    seed_day_1(db)
    cal = Calibrator(db, shipped, verifier_models=["m"])
    raised = cal.refresh("t", 0.01)
    assert raised.source == "raised" and load_ruled_out(db, "t", 0.01, ["m"]) > 0.0
    sessions = sessionmaker(db)
    with Session(db) as s:
        ids = s.scalars(select(MisfireSample.id).where(MisfireSample.label == "misfire")).all()
    assert len(ids) == 3
    label_sample(sessions, ids[0], "misfire", None, "admin")  # the same label: kept
    assert load_ruled_out(db, "t", 0.01, ["m"]) > 0.0
    for sample_id in ids:
        label_sample(sessions, sample_id, "correct", None, "admin")
    assert load_ruled_out(db, "t", 0.01, ["m"]) == 0.0
    cal.invalidate("t")  # what the label route does on its replica
    assert cal.refresh("t", 0.01).cut < raised.cut  # no misfire left: nothing ruled out


def test_a_deleted_tenant_takes_its_floors_with_it(tmp_path: Path) -> None:
    """forget_ruled_out (tenant deletion, a relabel) deletes every target and scale of
    the tenant, and no other tenant's."""
    db = migrated(tmp_path)
    for tenant in ("t", "u"):
        assert save_ruled_out(db, tenant, 0.01, ["m"], 0.99, labels_mark(db, tenant))
        assert save_ruled_out(db, tenant, 0.02, None, 0.98, labels_mark(db, tenant))
    save_ruled_out(db, "t", 0.01, ["m"], 0.95, labels_mark(db, "t"))  # lower: the higher stays
    assert load_ruled_out(db, "t", 0.01, ["m"]) == 0.99
    with Session(db) as s, s.begin():
        forget_ruled_out(s, "t")
    assert load_ruled_out(db, "t", 0.01, ["m"]) == load_ruled_out(db, "t", 0.02, None) == 0.0
    assert load_ruled_out(db, "u", 0.01, ["m"]) == 0.99  # the control
    assert load_ruled_out(db, "u", 0.02, None) == 0.98


def test_a_relabel_on_one_replica_is_not_undone_by_another(tmp_path: Path) -> None:
    """Replica B kept the floor in memory and wrote it back after A's relabel deleted it
    (a review of session 41's change); with a database the floor is what it holds."""
    db = migrated(tmp_path)
    seed_day_1(db)
    a = Calibrator(db, shipped, verifier_models=["m"])
    b = Calibrator(db, shipped, verifier_models=["m"])
    raised = a.refresh("t", 0.01)
    assert b.refresh("t", 0.01).cut == raised.cut and raised.source == "raised"
    with Session(db) as s:
        ids = s.scalars(select(MisfireSample.id).where(MisfireSample.label == "misfire")).all()
    for sample_id in ids:
        label_sample(sessionmaker(db), sample_id, "correct", None, "admin")
    a.invalidate("t")
    assert b.refresh("t", 0.01).cut < raised.cut  # no feed message needed to read it
    assert load_ruled_out(db, "t", 0.01, ["m"]) == 0.0  # and not written back
    assert a.refresh("t", 0.01).cut < raised.cut


def test_one_more_misfire_found_keeps_the_floor(tmp_path: Path) -> None:
    """A reviewer relabels a sample correct -> misfire after a backlog landed below
    the disproved range: more misfires rule out no less, so the floor stays (before
    session 44 any relabel deleted it, the backlog shifted the bands, and the range was
    served again: 4 misfires served, a review)."""
    db = migrated(tmp_path)
    seed_day_1(db)
    cal = Calibrator(db, shipped, verifier_models=["m"])
    raised = cal.refresh("t", 0.01)
    add_backlog(db)
    cal.invalidate("t")
    assert cal.refresh("t", 0.01).cut >= raised.cut
    floor = load_ruled_out(db, "t", 0.01, ["m"])
    assert floor == raised.band_cut > 0.0
    with Session(db) as s:
        order = MisfireSample.verifier_score.desc()
        top = s.scalars(select(MisfireSample.id).order_by(order)).first()
    assert top is not None
    label_sample(sessionmaker(db), top, "misfire", None, "admin")
    assert load_ruled_out(db, "t", 0.01, ["m"]) == floor
    cal.invalidate("t")  # what the label route does
    assert cal.refresh("t", 0.01).cut >= raised.cut


def test_a_withdrawn_misfire_deletes_only_the_floors_its_score_could_have_set(
    tmp_path: Path,
) -> None:
    # A misfire at 0.985 relabelled correct was evidence only for ranges below a floor
    # above it: the 0.99 floor goes, the 0.98 one (its ranges all below 0.985) stays.
    db = migrated(tmp_path)
    assert save_ruled_out(db, "t", 0.01, ["m"], 0.99, labels_mark(db, "t"))
    assert save_ruled_out(db, "t", 0.02, ["m"], 0.98, labels_mark(db, "t"))
    with Session(db) as s, s.begin():
        forget_ruled_out(s, "t", from_score=0.985)
    assert load_ruled_out(db, "t", 0.02, ["m"]) == 0.98
    assert load_ruled_out(db, "t", 0.01, ["m"]) == 0.98  # the looser target's, kept


def test_tightening_the_target_keeps_the_looser_targets_floor(tmp_path: Path) -> None:
    """A range the 2% target disproved, kept cut off through a backlog by its floor, is
    not served again when the tenant tightens to 1%: a stricter target reads a looser
    one's floor (before session 44 it recomputed 2% from the labels alone, whose bands
    the backlog had shifted: 4 misfires served, a review)."""
    s2, s1 = shipped(0.02), shipped(0.01)
    day_1 = [(s, False) for s in span(s2, s1, 30)]
    bad = span(s1 + 1e-5, s1 + 0.004, 30)
    day_1 += [(s, i in (5, 10, 20, 25)) for i, s in enumerate(bad)]
    day_1 += [(s, False) for s in span(s1 + 0.0041, 0.9999, 200)]
    backlog = [(s, False) for s in span(s1, s1 + 1e-5, 15)]
    db = migrated(tmp_path)

    def add(rows: list[tuple[float, bool]]) -> None:
        with Session(db) as s, s.begin():
            for score, misfire in rows:
                label = "misfire" if misfire else "correct"
                s.add(sample("t", score, label, utc_now(), "m"))

    add(day_1)
    cal = Calibrator(db, shipped, verifier_models=["m"])
    raised = cal.refresh("t", 0.02)
    assert raised.source == "raised" and raised.misfires == 0
    add(backlog)
    cal.invalidate("t")
    assert cal.refresh("t", 0.02).misfires == 0  # the floor holds at 2% (the control)
    cal.invalidate("t")  # the policy change: 2% -> 1%
    stricter = cal.refresh("t", 0.01)
    assert stricter.cut >= raised.cut and stricter.misfires == 0
    restarted = Calibrator(db, shipped, verifier_models=["m"])  # from the database alone
    assert restarted.refresh("t", 0.01).cut >= raised.cut
