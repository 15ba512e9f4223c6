"""The misfire report's weighted rate (gateway/reports/sections.py ``weighted_misfires``):
each labelled sample weighs 1 / the probability it was sampled with, beside the plain
rate; none when a sample lacks its probability. Built by ``build_report`` from a real
migrated SQLite database, rendered as text and HTML."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from gateway.reports.build import ReportParams, build_report, load
from gateway.reports.html import render
from gateway.reports.stats import wilson, wilson_at
from gateway.reports.text import format_summary
from gateway.tenants import utc_now
from tests.gateway.test_calibration import migrated, sample


def add(db_path: Path, tenant: str, rows: Sequence[tuple[bool, float | None]]) -> None:
    """Labelled samples of ``tenant``: (is a misfire, sampling probability or None)."""
    from sqlalchemy import create_engine

    db = create_engine(f"sqlite:///{db_path}")
    with Session(db) as s, s.begin():
        for misfire, p in rows:
            row = sample(tenant, 0.95, "misfire" if misfire else "correct", utc_now())
            if p is not None:
                row.entity_comparison = {"sampling": {"rate": 0.1, "probability": p}}
            s.add(row)
    db.dispose()


def test_the_report_weighs_each_label_by_its_sampling_probability(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    path = tmp_path / "cal.db"
    # 200 hits sampled at 10% (4 misfires), 100 near-threshold ones at 30% (12 misfires).
    add(path, "t", [(i < 4, 0.1) for i in range(200)] + [(i < 12, 0.3) for i in range(100)])
    # The same labels, one sample without a recorded probability.
    add(path, "u", [(i < 4, 0.1) for i in range(200)] + [(i < 12, 0.3) for i in range(99)])
    add(path, "u", [(False, None)])
    report = build_report(db, ReportParams())
    t = report["tenants"]["t"]["misfires"]
    assert (t["misfires"], t["labelled"]) == (16, 300)
    assert t["rate"] == pytest.approx(16 / 300)  # plain, as before
    assert (t["wilson_low"], t["wilson_high"]) == pytest.approx(wilson(16, 300))
    weighted = t["weighted"]
    rate = (4 * 10 + 12 * 10 / 3) / (200 * 10 + 100 * 10 / 3)
    n_eff = (200 * 10 + 100 * 10 / 3) ** 2 / (200 * 100 + 100 * (10 / 3) ** 2)
    assert weighted["rate"] == pytest.approx(rate) and rate < t["rate"]
    assert weighted["n_effective"] == pytest.approx(n_eff)
    assert (weighted["wilson_low"], weighted["wilson_high"]) == pytest.approx(
        wilson_at(rate, n_eff)
    )
    # Positive control beside the negative one: "u" differs by one sample only.
    assert report["tenants"]["u"]["misfires"]["weighted"] is None
    assert report["summary"]["misfires"]["weighted"] is None  # "u" is in the overall
    assert "misfire_rate_weighted" in report["definitions"]
    text = format_summary(report)
    assert f"weighted by sampling {100 * rate:.1f}%" in text
    assert "weighted by sampling n/a" in text
    assert "weighted by sampling" not in render(report, {})  # overall: none
    tenant = build_report(db, ReportParams(tenant="t"))
    assert f"weighted by sampling {100 * rate:.1f}%" in render(tenant, {})
    db.dispose()


def test_the_headline_is_the_weighted_estimate_when_every_label_has_its_probability() -> None:
    """Stale answers at 1.0 (sampled at the base rate) among over-sampled near-threshold
    hits: the plain share of labels said 25%, the estimate of served hits is 50%; the
    report led with the plain one and called it pessimistic (a review, session 41)."""
    from gateway.reports.sections import ReportParams, Sample, misfire_section
    from gateway.reports.text import headline

    near = [Sample("t", 0.9, "correct", None, 0.15) for _ in range(30)]
    stale = [Sample("t", 1.0, "misfire", None, 0.05) for _ in range(10)]
    m = misfire_section(near + stale, ReportParams())["misfires"]
    assert m["rate"] == pytest.approx(0.25)
    assert headline(m)["rate"] == pytest.approx(0.5)
    unweighted = misfire_section(
        [Sample("t", 0.9, "correct", None, None), Sample("t", 1.0, "misfire", None, 0.05)],
        ReportParams(),
    )["misfires"]
    assert headline(unweighted) is unweighted  # a label without its probability: plain


def test_the_report_reads_the_newest_samples_and_only_their_sampling_record(
    tmp_path: Path,
) -> None:
    # Each sample's probability comes from its comparison's sampling record alone (not
    # the whole comparison), and at most max_rows samples are read, the newest, with
    # the report said truncated (before session 44: every sample of the window, whole).
    db = migrated(tmp_path)
    now = utc_now()
    with Session(db) as s, s.begin():
        for i, probability in enumerate((0.3, 0.1, 1.0)):
            row = sample("t", 0.9, "correct", now - timedelta(minutes=3 - i))
            row.entity_comparison = {
                "sampling": {"probability": probability},
                "questions": {"a": "x" * 5000},
            }
            s.add(row)
    samples, _, _, truncated = load(db, ReportParams(hours=1.0, max_rows=2))
    assert truncated and sorted(x.probability or 0.0 for x in samples) == [0.1, 1.0]  # newest
    every, _, _, whole = load(db, ReportParams(hours=1.0))
    assert not whole and sorted(x.probability or 0.0 for x in every) == [0.1, 0.3, 1.0]
