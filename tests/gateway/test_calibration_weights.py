"""A tenant's labels weighted by 1 / the probability they were sampled with
(gateway/calibration.py): near-threshold hits are sampled 3x, so counted plainly they
stand for three times their share of what a cut serves. Equal weights give the plain
counts exactly; unequal ones the weighted rate at Kish's effective sample size; the
weight comes from the sampling probability stored with each sample in a real migrated
SQLite database."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from gateway.calibration import Calibrator, load_labels, tenant_cut, weighted
from gateway.reports.stats import weighted_wilson, wilson, wilson_at
from gateway.tenants import utc_now
from tests.gateway.test_calibration import migrated, sample

#: 200 hits sampled at 10% (4 misfires) and 100 near-threshold hits sampled at 30%
#: (12 misfires), all above a shipped cut of 0.9: plainly 16/300 = 5.3%, weighted
#: (4·10 + 12·10/3) / (200·10 + 100·10/3) = 3.4%.
PLAIN = [(0.95, False)] * 196 + [(0.95, True)] * 4 + [(0.93, False)] * 88 + [(0.93, True)] * 12
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
    # cut (lower bound 3.3% > 2%) and raise it above them.
    assert (plain.source, plain.cut) == ("raised", 0.93)
    cut = tenant_cut(with_weights(PLAIN, PROBABILITIES), 0.02, shipped_cut=0.9)
    assert (cut.source, cut.cut, cut.served, cut.misfires) == ("shipped", 0.9, 300, 16)
    assert cut.estimate == pytest.approx(80 / (2000 + 1000 / 3))
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
    recorded: list[object] = [
        {"sampling": {"rate": 0.1, "probability": 0.1, "boosted": False}},
        {"sampling": {"rate": 0.1, "probability": 0.3, "boosted": True}},
        {"questions": {}},  # written before sampling was recorded
        None,
        {"sampling": {"probability": 0}},  # unusable: never a division by zero
        {"sampling": {"probability": True}},
        {"sampling": {"probability": "0.5"}},
    ]
    with Session(db) as s, s.begin():
        for i, comparison in enumerate(recorded):
            row = sample("t", 0.9 + i / 100, "correct", now)
            row.entity_comparison = comparison  # type: ignore[assignment]
            s.add(row)
    weights = {round(x.score, 2): x.weight for x in load_labels(db, "t")}
    assert weights[0.9] == pytest.approx(10.0) and weights[0.91] == pytest.approx(10 / 3)
    assert [weights[round(0.92 + i / 100, 2)] for i in range(5)] == [1.0] * 5
    db.dispose()


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
    assert math.isclose(weighted_cut.estimate or 0.0, 80 / (2000 + 1000 / 3))
    db.dispose()
