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

import pytest
from sqlalchemy.orm import Session

from gateway.calibration import TARGET_GRID, tenant_cut
from gateway.calibrator import Calibrator
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


@pytest.mark.xfail(
    strict=True,
    reason="known, session 40: clean labels arriving below a disproved range (samples "
    "taken before the raise, labelled after it) shift the bands, and from labels alone "
    "the range can be served again (the Calibrator keeps the band cut per process: the "
    "test below); the fix needs bands that labels below do not move (README)",
)
def test_labels_of_a_review_backlog_below_a_disproved_range_keep_it_cut_off() -> None:
    strict = shipped(0.01)
    bad = span(strict + 1e-5, strict + 0.004, 30)
    day_1 = [(s, i in (10, 16, 20)) for i, s in enumerate(bad)]
    day_1 += [(s, False) for s in span(strict + 0.0041, 0.9999, 200)]
    raised = tenant_cut(day_1, 0.01, strict, looser=looser(0.01))
    assert raised.source == "raised" and raised.misfires == 0  # the control
    backlog = [(s, False) for s in span(strict, strict + 1e-5, 15)]  # labelled on day 2
    again = tenant_cut(day_1 + backlog, 0.01, strict, looser=looser(0.01))
    assert again.cut >= raised.cut and again.misfires == 0


def test_a_calibrator_keeps_a_ruled_out_range_cut_off_through_a_review_backlog(
    tmp_path: Path,
) -> None:
    """The case above through the gateway's Calibrator: it keeps the band cut its
    labels set (per process, until the tenant changes), so the backlog labelled on day
    2 does not re-serve the range; a change of the tenant (its policy) starts afresh."""
    db = migrated(tmp_path)
    now = utc_now()
    strict = shipped(0.01)
    bad = span(strict + 1e-5, strict + 0.004, 30)
    with Session(db) as s, s.begin():
        for i, score in enumerate(bad):
            s.add(sample("t", score, "misfire" if i in (10, 16, 20) else "correct", now, "m"))
        for score in span(strict + 0.0041, 0.9999, 200):
            s.add(sample("t", score, "correct", now, "m"))
    cal = Calibrator(db, shipped, verifier_models=["m"])
    raised = cal.refresh("t", 0.01)
    assert raised.source == "raised" and raised.misfires == 0  # the control
    with Session(db) as s, s.begin():  # day 2: older samples, labelled now
        for score in span(strict, strict + 1e-5, 15):
            s.add(sample("t", score, "correct", now, "m"))
    again = cal.refresh("t", 0.01)
    assert again.cut >= raised.cut and again.misfires == 0
    assert "band_cut" not in again.to_dict()  # the report's shape is as it was
    cal.invalidate("t")  # a policy change: its labels are read afresh
    assert cal.refresh("t", 0.01).cut < raised.cut  # what the xfail above says
