"""The tenant cut's guarantees against the labels it is given (gateway/calibration.py,
session 21): a stored score that is no probability neither hangs nor breaks it; a range
the labels disprove is never served again, however many clean labels arrive above it;
the cut never drops below the shipped one (labels of a looser period, or a scan over
every labelled score re-run on every refresh, "proved" such cuts falsely)."""

from __future__ import annotations

import math
import random
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from gateway.calibration import (
    CutInForce,
    _band_alpha,
    _binomial_tail,
    tenant_cut,
)
from gateway.calibration_labels import load_labels
from gateway.reports.stats import weighted_wilson
from gateway.review.sampling_rule import stored_score
from gateway.tenants import utc_now
from migrations.runner import upgrade_database
from tests.gateway.conftest import PG_SERVER_URL
from tests.gateway.test_calibration import migrated, sample

SHIPPED = 0.981161  # the shipped curve's 1% cut (calibration.json, session 29)
CLEAN = [(0.9 + i * 1e-4, False) for i in range(400)]


def cut_within(data: list[tuple[float, bool]], target: float, shipped: float) -> CutInForce:
    """tenant_cut on a daemon thread: a hang fails the test instead of the run (a NaN
    score once spun the scan forever)."""
    out: list[CutInForce] = []
    worker = threading.Thread(
        target=lambda: out.append(tenant_cut(data, target, shipped)), daemon=True
    )
    worker.start()
    worker.join(5.0)
    assert out, "tenant_cut did not return within 5 s"
    return out[0]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1.5, -0.5])
@pytest.mark.parametrize("where", ["first", "last", "among misfires"])
def test_a_score_that_is_no_probability_is_left_out(bad: float, where: str) -> None:
    if where == "first":
        data = [(bad, True), *CLEAN]
    elif where == "last":
        data = [*CLEAN, (bad, True)]
    else:  # 29 real misfires and the bad one: not enough labels to move the cut
        data = [(0.99, True)] * 29 + [(bad, True)]
    cut = cut_within(data, 0.01, SHIPPED)
    assert 0.0 <= cut.cut <= 1.0
    assert cut.labelled == len(data) - 1
    assert (cut.source, cut.cut) == ("shipped", SHIPPED)


def test_the_cut_stays_within_0_and_1() -> None:
    # Misfires at the very top raise the cut to 1.0 at most; a damaged shipped cut is
    # clamped (NaN: nothing served).
    assert tenant_cut([(1.0, True)] * 40, 0.01, SHIPPED).cut == 1.0
    assert tenant_cut([], 0.01, 1.7).cut == 1.0
    assert tenant_cut([], 0.01, math.nan).cut == 1.0
    assert tenant_cut([], 0.01, -0.2).cut == 0.0


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_load_labels_keeps_only_probabilities(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        db = migrated(tmp_path)
    else:  # PostgreSQL keeps NaN (above every number) and ±inf: the windows skip them
        schema = request.getfixturevalue("pg_schema")
        url = f"{PG_SERVER_URL}?options=-csearch_path%3D{schema}"
        upgrade_database(url)
        db = create_engine(url)
    now = utc_now()
    with Session(db) as s, s.begin():
        for score in (math.inf, -math.inf, 1.5, -0.5, 0.0, 0.5, 1.0, math.nan):
            s.add(sample("t", score, "misfire", now))
    assert sorted(x.score for x in load_labels(db, "t")) == [0.0, 0.5, 1.0]
    db.dispose()


def test_the_sampler_stores_no_score_that_is_no_probability() -> None:
    for bad in (math.nan, math.inf, -math.inf, 1.5, -0.5, None):
        assert stored_score(bad) is None
    assert [stored_score(x) for x in (0.0, 0.42, 1.0)] == [0.0, 0.42, 1.0]


def test_a_disproved_band_is_never_served_again_however_many_clean_labels_above() -> None:
    # 20 of 100 hits at 0.982 were wrong (Wilson lower bound 13% > 1%): the cut rose
    # above them and since then only clean labels above arrive. Pooled, 3,000 of them
    # "proved" a cut below 0.982 until session 21, serving the band again.
    band = [(0.982, False)] * 80 + [(0.982, True)] * 20
    assert _low(20, 100, 1.959964) > 0.01
    for extra in (0, 200, 1000, 3000, 10_000):
        data = band + [(0.995, False)] * (200 + extra)
        cut = tenant_cut(data, 0.01, SHIPPED)
        assert cut.cut >= 0.982 and cut.misfires == 0, extra


def test_property_no_disproved_band_is_served() -> None:
    # Any disproved band of labels at one score, any number of clean labels above it:
    # the cut never serves it. Disproved: that many misfires would come at the target
    # rate with chance at most the lowest range's level, which no label above changes
    # (until session 37 a Bonferroni level over every band: clean labels piling up
    # above shrank it until the band was no longer disproved, and it was served again).
    rng = random.Random(21)
    for _ in range(60):
        target = rng.choice([0.005, 0.01, 0.02, 0.05])
        shipped = rng.uniform(0.7, 0.95)
        at = rng.uniform(shipped, 0.99)
        n = rng.randint(30, 150)
        extra = rng.randint(0, 5000)
        alpha = _band_alpha(1)  # the lowest range: nothing is labelled below it
        k = next(k for k in range(n + 1) if _binomial_tail(k, n, target) <= alpha)
        band = [(at, i < k) for i in range(n)]
        clean = [(rng.uniform(at, 1.0), False) for _ in range(extra)]
        cut = tenant_cut(band + clean, target, shipped)
        assert cut.cut >= at, (target, n, k, extra)


def test_a_disproved_band_is_not_diluted_by_the_band_above() -> None:
    """90 distinct scores above the shipped cut; the middle 30 hold 3 misfires (a 1%
    target: disproved). Until session 37 the cut rose by one label and served all 3
    (estimate 3.4%, interval [1.15%, 9.45%], "raised"): the candidate's short piece
    joined the band above and diluted it."""
    data = [(round(0.901 + i * 0.001, 3), i in (31, 40, 55)) for i in range(90)]
    cut = tenant_cut(data, 0.01, 0.90)
    assert cut.source == "raised" and cut.misfires == 0 and cut.cut >= 0.960
    clean = [(s, False) for s, _ in data]  # the control: the same scores, no misfire
    assert tenant_cut(clean, 0.01, 0.90).source != "raised"


@pytest.mark.parametrize("shape", ["distinct", "tied"])
def test_a_disproved_range_stays_cut_off_as_clean_labels_arrive_above(shape: str) -> None:
    """After a raise, new samples come only from above the cut. With distinct scores
    (what a verifier gives) the bands laid from the top shifted with each one, and the
    cut fell back to the shipped one at 269 labels; tied, the Bonferroni level shrank
    until 200 clean labels re-served the range. Every refresh, up to 1,000 above."""
    if shape == "distinct":
        bad = [(0.9301 + i * 1e-4, i in (3, 11, 19, 27)) for i in range(30)]
    else:
        bad = [(0.9315, i < 3) for i in range(30)]
    top = max(score for score, _ in bad)
    rng = random.Random(5)
    clean: list[tuple[float, bool]] = []
    for n in range(1001):
        if n <= 300 or n % 50 == 0:
            cut = tenant_cut(bad + clean, 0.01, 0.90)
            assert cut.cut >= top and cut.misfires == 0, (n, cut)
        clean.append((rng.uniform(0.94, 0.999), False))
    # the control: the same labels without the misfires are not raised
    fine = [(score, False) for score, _ in bad] + clean
    assert tenant_cut(fine, 0.01, 0.90).source != "raised"


def _low(k: int, n: int, z: float) -> float:
    interval = weighted_wilson(k, n, n, z=z)
    assert interval is not None
    return interval[1]


def test_labels_of_a_looser_period_never_lower_the_cut_below_the_shipped_one() -> None:
    # Target 5% (shipped cut 0.733) for a while: 8% misfires at 0.85. Then 1% (shipped
    # 0.981): clean labels above 0.981 pile up. The cut stays at 0.981: until session
    # 21 they "proved" a cut below 0.85, re-serving the 8% band at a 1% target.
    loose = [(0.85, False)] * 92 + [(0.85, True)] * 8 + [(0.995, False)] * 100
    for extra in (0, 2000, 4000):
        cut = tenant_cut(loose + [(0.995, False)] * extra, 0.01, SHIPPED)
        assert cut.cut >= SHIPPED, extra
    # Positive control: raising still works.
    bad_top = loose + [(0.99, True)] * 30 + [(0.99, False)] * 70
    assert tenant_cut(bad_top, 0.01, SHIPPED).source == "raised"


def test_refreshes_at_a_rate_above_the_target_rarely_serve_below_the_shipped_cut() -> None:
    # Every hit misfires at 1.3% (target 1%): no cut below the shipped one meets the
    # target. Labels scored 0.5..1.0 (a looser period), the cut recomputed every 100
    # labels as a calibrator would. (A guard only: at this size, which keeps the test
    # fast, the old scan over every labelled score also stays under 5%; at 3,000 labels
    # re-checked every 50 it lowered the cut in 10% of runs, 13% in the review's repro.)
    runs, lowered = 40, 0
    for seed in range(runs):
        rng = random.Random(seed)
        data: list[tuple[float, bool]] = []
        for n in range(1, 1601):
            data.append((rng.uniform(0.5, 1.0), rng.random() < 0.013))
            if n >= 400 and n % 100 == 0 and tenant_cut(data, 0.01, 0.9).cut < 0.9:
                lowered += 1
                break
    assert lowered <= 0.05 * runs


def test_a_tenant_at_its_target_is_rarely_raised() -> None:
    # Labels of a tenant whose served hits are wrong exactly at its target rate must
    # raise its cut in few draws (each disproof at 2.5%, bands Bonferroni-corrected):
    # with Wilson's bound a band of 30 was "disproved" by 2 misfires, and such tenants
    # were raised in ~30% of draws at 300 labels.
    rng = random.Random(56)
    for target, n in ((0.01, 300), (0.05, 300), (0.01, 1000)):
        runs = 100
        raised = 0
        for _ in range(runs):
            data = [(rng.uniform(0.9, 1.0), rng.random() < target) for _ in range(n)]
            raised += tenant_cut(data, target, 0.9).source == "raised"
        assert raised <= 0.08 * runs, (target, n, raised)


@pytest.mark.parametrize("window", [60, 1000])
def test_a_disproved_range_stays_read_however_many_labels_follow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    """Labels that disproved a range stay read once newer labels outnumber the window:
    after the raise new samples come only from above the cut, so read newest-first the
    range's labels fell out and it was served again. window=1000 is the control (every
    label read)."""
    import gateway.calibration_labels as calibration_labels

    monkeypatch.setattr(calibration_labels, "MAX_SAMPLES", window)
    db = migrated(tmp_path)
    now = utc_now()
    bad = [SHIPPED + 1e-4 + i * 1e-5 for i in range(30)]  # the band just above the cut
    with Session(db) as s, s.begin():
        for i, score in enumerate(bad):
            s.add(sample("t", score, "misfire" if i % 6 == 0 else "ok", now))  # 5 of 30
    with Session(db) as s, s.begin():  # then many clean labels, all above the raised cut
        for i in range(200):
            s.add(sample("t", 0.995 + i * 1e-5, "ok", now))
        s.add(sample("other", SHIPPED + 1e-4, "misfire", now))  # another tenant's
    labels = load_labels(db, "t")
    # newest 60 ∪ lowest 60 (the 30 bad and the 30 lowest clean), or all 230
    assert len(labels) == (120 if window == 60 else 230)
    cut = tenant_cut(labels, 0.01, SHIPPED)
    assert cut.source == "raised" and cut.cut >= max(bad), cut
    assert cut.misfires == 0 and cut.served == (90 if window == 60 else 200)
    db.dispose()
