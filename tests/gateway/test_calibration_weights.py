"""A tenant's labels weighted by 1 / the probability they were sampled with
(gateway/calibration.py): near-threshold hits are sampled 3x, so counted plainly they
stand for three times their share of what a cut serves. Equal weights give the plain
counts exactly; unequal ones the weighted rate at Kish's effective sample size; the
weight comes from the sampling probability stored with each sample in a real migrated
SQLite database."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

import gateway.calibration_labels as calibration_labels
from gateway.calibration import _Suffix, tenant_cut, weighted
from gateway.calibration_labels import load_labels
from gateway.calibrator import Calibrator
from gateway.reports.stats import weighted_wilson, wilson, wilson_at
from gateway.tenants import utc_now
from tests.gateway.test_calibration import migrated, sample

#: 200 hits sampled at 10% (6 misfires) and 100 near-threshold hits sampled at 30%
#: (6 misfires), all above a shipped cut of 0.9: plainly 12/300 = 4%, weighted
#: (6·10 + 6·10/3) / (200·10 + 100·10/3) = 3.4%. Neither score band alone is disproved
#: at 2% (session 21: a band with 12% misfires is, weighted or not).
PLAIN = [(0.95, False)] * 194 + [(0.95, True)] * 6 + [(0.93, False)] * 94 + [(0.93, True)] * 6
WEIGHTED_RATE = (6 * 10 + 6 * 10 / 3) / (2000 + 1000 / 3)
PROBABILITIES = [0.1] * 200 + [0.3] * 100


def with_weights(data: list[tuple[float, bool]], probabilities: list[float]) -> list[Any]:
    return [(s, m, 1 / p) for (s, m), p in zip(data, probabilities, strict=True)]


def test_equal_weights_are_the_plain_counts_exactly() -> None:
    cases = [
        ([(0.99, False)] * 80 + [(0.99, True)] * 20, 0.01, 0.98),  # raised
        ([(0.6 + 0.001 * i, False) for i in range(400)], 0.01, 0.9),  # proven
        (PLAIN, 0.02, 0.9),
    ]
    for data, target, shipped in cases:
        plain = tenant_cut(data, target, shipped)
        for p in (0.3, 0.05, 1.0):  # one sampling rate for all: the same evidence
            assert tenant_cut(with_weights(data, [p] * len(data)), target, shipped) == plain


def test_boosted_misfires_count_for_their_share_of_the_hits() -> None:
    plain = tenant_cut(PLAIN, 0.02, shipped_cut=0.9)
    # Counted plainly, the over-sampled near-threshold misfires disprove the shipped
    # cut (12 of 300 come at a 2% rate with chance under 2.5%) and raise it above them.
    assert (plain.source, plain.cut) == ("raised", 0.93)
    cut = tenant_cut(with_weights(PLAIN, PROBABILITIES), 0.02, shipped_cut=0.9)
    assert (cut.source, cut.cut, cut.served, cut.misfires) == ("shipped", 0.9, 300, 12)
    assert cut.estimate == pytest.approx(WEIGHTED_RATE)
    # The interval is Wilson's at the effective sample size: wider than 300 samples'
    # at the same rate.
    n_eff = (2000 + 1000 / 3) ** 2 / (200 * 100 + 100 * (10 / 3) ** 2)
    assert 250 < n_eff < 300
    assert cut.low is not None and cut.high is not None and cut.low <= 0.02 < cut.high
    low300, high300 = wilson_at(cut.estimate or 0.0, 300)
    assert cut.high - cut.low > high300 - low300
    assert (cut.low, cut.high) == pytest.approx(wilson_at(cut.estimate or 0.0, n_eff))
    # Positive control: the same hits, all near-threshold ones misfiring far more
    # often, are disproved weighted too.
    worse = PLAIN[:200] + [(0.93, False)] * 60 + [(0.93, True)] * 40
    assert tenant_cut(with_weights(worse, PROBABILITIES), 0.02, 0.9).source == "raised"


def test_weighted_wilson_reduces_to_wilson_and_rejects_no_weight() -> None:
    assert weighted_wilson(0.0, 0.0, 0.0) is None
    for k, n in ((0, 10), (3, 10), (10, 10), (16, 300)):
        rate, low, high = weighted_wilson(float(k), float(n), float(n))  # type: ignore[misc]
        assert rate == k / n and (low, high) == pytest.approx(wilson(k, n), abs=1e-12)
    assert [x.weight for x in weighted([(0.5, False, 4.0), (0.7, True, 4.0)])] == [1.0, 1.0]


def test_load_labels_weights_each_by_its_recorded_sampling_probability(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    now = utc_now()
    recorded = [0.1, 0.3, 1.0, 1e-6]
    unusable: list[object] = [
        {"questions": {}},  # written before sampling was recorded
        None,
        {"sampling": {"probability": 0}},  # never a division by zero
        {"sampling": {"probability": 1e-300}},  # nor an overflow of Σw²
        {"sampling": {"probability": True}},
        {"sampling": {"probability": "0.5"}},
        {"sampling": {"probability": 1.5}},
    ]
    with Session(db) as s, s.begin():
        for i, p in enumerate(recorded):
            for tenant in ["t"] + [f"u{j}" for j in range(len(unusable))]:
                row = sample(tenant, 0.9 + i / 100, "correct", now)
                row.entity_comparison = {"sampling": {"rate": 0.1, "probability": p}}
                s.add(row)
        for j, comparison in enumerate(unusable):  # one bad sample in each u tenant
            row = sample(f"u{j}", 0.99, "correct", now)
            row.entity_comparison = comparison  # type: ignore[assignment]
            s.add(row)
    weights = {round(x.score, 2): x.weight for x in load_labels(db, "t")}
    assert weights == pytest.approx({0.9: 10.0, 0.91: 10 / 3, 0.92: 1.0, 0.93: 1e6})
    # One sample without a usable probability weighs what the recorded ones weigh in
    # the middle; theirs stay (until session 47 every weight of the tenant became 1).
    for j in range(len(unusable)):
        found = {round(x.score, 2): x.weight for x in load_labels(db, f"u{j}")}
        assert found == pytest.approx({**weights, 0.99: 10 / 3}), unusable[j]
    db.dispose()


def test_a_tenant_without_any_record_counts_plainly(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    with Session(db) as s, s.begin():
        for i in range(4):
            s.add(sample("t", 0.9 + i / 100, "correct", utc_now()))
    assert [x.weight for x in load_labels(db, "t")] == [1.0] * 4
    db.dispose()


def test_past_the_windows_the_newest_stand_for_every_label_above_the_lowest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 400 labels, one sampling rate, scores spread over [0.90, 1.00): the misfires are
    # the ones below 0.91. The windows hold 50: the 50 lowest scores (all below ~0.913)
    # and the 50 newest. Every label was sampled alike, so the estimate over what was
    # read must be the rate over all 400: 10%.
    monkeypatch.setattr(calibration_labels, "MAX_SAMPLES", 50)
    db = migrated(tmp_path)
    rng = random.Random(47)
    scores = [0.9 + 0.1 * rng.random() for _ in range(400)]
    with Session(db) as s, s.begin():
        for score in scores:
            row = sample("t", score, "misfire" if score < 0.91 else "correct", utc_now())
            row.entity_comparison = {"sampling": {"probability": 0.2}}
            s.add(row)
    truth = sum(x < 0.91 for x in scores) / len(scores)
    labels = load_labels(db, "t")
    assert 50 < len(labels) < 100  # both windows, each label once
    rate = math.fsum(x.weight for x in labels if x.misfire) / math.fsum(x.weight for x in labels)
    assert rate == pytest.approx(truth, rel=1e-9)
    # read plainly (the windows before session 47) the misfires were over half of it
    assert sum(x.misfire for x in labels) / len(labels) > 0.4
    # Control: windows that hold every label weigh each by its probability alone.
    monkeypatch.setattr(calibration_labels, "MAX_SAMPLES", 400)
    assert [x.weight for x in load_labels(db, "t")] == pytest.approx([5.0] * 400)
    db.dispose()


def test_past_the_windows_a_lowered_sample_rate_still_weighs_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The diff review's case: the first 300 labels drawn at probability 1, the newest 100
    # at 0.01, misfires below 0.91. The newest 50 (weight 100 each) stand above the
    # lowest window for 300-odd older labels of weight 1 and few newer ones: scaled by
    # count, the 11% rate read as 3.1%; scaled by weight, per class, it is exact.
    monkeypatch.setattr(calibration_labels, "MAX_SAMPLES", 50)
    db = migrated(tmp_path)
    rng = random.Random(7)
    drawn = [(0.9 + 0.1 * rng.random(), 1.0 if i < 300 else 0.01) for i in range(400)]
    with Session(db) as s, s.begin():
        for score, p in drawn:
            row = sample("t", score, "misfire" if score < 0.91 else "correct", utc_now())
            row.entity_comparison = {"sampling": {"probability": p}}
            s.add(row)
    truth = math.fsum(1 / p for x, p in drawn if x < 0.91) / math.fsum(1 / p for _, p in drawn)
    labels = load_labels(db, "t")
    assert len(labels) < 100
    rate = math.fsum(x.weight for x in labels if x.misfire) / math.fsum(x.weight for x in labels)
    assert rate == pytest.approx(truth, rel=1e-9)
    db.dispose()


def test_weights_spanning_orders_of_magnitude_keep_the_sums_exact() -> None:
    # A sample rate once near 1e-6, later near 1: the sums above each cut are added
    # from the top down, so each is within rounding of its own exact sum. (Running
    # sums that subtracted each label as the cut rose were differences of huge
    # numbers: Σw² of the last 30 labels came out negative, the interval undefined.)
    rng = random.Random(3)
    rare = [(0.5 + i * 1e-5, rng.random() < 0.5, 1 / rng.uniform(1e-6, 3e-6)) for i in range(5000)]
    dense = [(0.99, i % 4 == 0, 1 / 0.7) for i in range(30)]
    ordered = weighted(rare + dense)
    sums = _Suffix(ordered)
    for i in (0, 2500, 4999, 5000, 5015, 5029, 5030):
        above = ordered[i:]
        assert (sums.n[i], sums.k[i]) == (len(above), sum(x.misfire for x in above))
        assert sums.w[i] == pytest.approx(math.fsum(x.weight for x in above), rel=1e-12)
        assert sums.w2[i] == pytest.approx(math.fsum(x.weight**2 for x in above), rel=1e-12)
        assert sums.wm[i] == pytest.approx(
            math.fsum(x.weight for x in above if x.misfire), rel=1e-12, abs=0.0
        )
    assert sums.interval(5030) is None
    rate, low, high = sums.interval(5000)  # type: ignore[misc]
    assert (rate, low, high) == pytest.approx((8 / 30, *wilson(8, 30)))  # type: ignore[misc]
    # The labels above the shipped cut, the dense ones, confirm it at 50%.
    cut = tenant_cut(rare + dense, 0.5, shipped_cut=0.98)
    assert (cut.source, cut.served, cut.misfires) == ("tenant", 30, 8)


def test_the_calibrator_serves_the_weighted_cut(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    now = utc_now()
    with Session(db) as s, s.begin():
        for (score, misfire), p in zip(PLAIN, PROBABILITIES, strict=True):
            row = sample("t", score, "misfire" if misfire else "correct", now)
            row.entity_comparison = {"sampling": {"probability": p}}
            s.add(row)
            # Another tenant with the same labels, all sampled alike: the plain counts.
            row = sample("u", score, "misfire" if misfire else "correct", now)
            row.entity_comparison = {"sampling": {"probability": 0.1}}
            s.add(row)
    cal = Calibrator(db, lambda target: 0.9)
    weighted_cut, plain_cut = cal.refresh("t", 0.02), cal.refresh("u", 0.02)
    assert (weighted_cut.source, weighted_cut.cut) == ("shipped", 0.9)
    assert (plain_cut.source, plain_cut.cut) == ("raised", 0.93)
    assert math.isclose(weighted_cut.estimate or 0.0, WEIGHTED_RATE)
    db.dispose()


def coverage(use_w2m: bool, trials: int = 400, hits: int = 10_000) -> float:
    """How often the weighted 95% interval holds the true misfire rate when misfires
    sit only in the rarely sampled, heavy hits: 90% of hits are near the threshold and
    sampled at 30% (clean), the rest at 10% (a tenth of them misfires): truth 1%."""
    rng = random.Random(44)
    truth, held = 0.1 * 0.1, 0
    for _ in range(trials):
        w = wm = w2 = w2m = 0.0
        for _ in range(hits):
            near = rng.random() < 0.9
            p = 0.3 if near else 0.1
            if rng.random() >= p:
                continue
            misfire = not near and rng.random() < 0.1
            w, w2 = w + 1 / p, w2 + 1 / p**2
            if misfire:
                wm, w2m = wm + 1 / p, w2m + 1 / p**2
        found = weighted_wilson(wm, w, w2, w2m if use_w2m else None)
        assert found is not None
        held += found[1] <= truth <= found[2]
    return held / trials


def test_the_weighted_interval_covers_where_misfires_sit_in_heavy_hits() -> None:
    # Kish's size alone assumes the rate is the same in every weight class: here its
    # "95%" interval missed the truth one time in five (a review, session 44).
    assert coverage(use_w2m=False) < 0.85
    assert coverage(use_w2m=True) >= 0.93
    # equal weights: still Wilson's interval exactly
    for k, n in ((0, 10), (3, 10), (16, 300)):
        found = weighted_wilson(float(k), float(n), float(n), float(k))
        assert found is not None and found[1:] == pytest.approx(wilson(k, n), abs=1e-12)
