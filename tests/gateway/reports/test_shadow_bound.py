"""The upper bound shadow verdicts give on a tenant's misfire rate
(gateway/reports/shadow_bound.py): ``agree`` counts as correct, ``disagree`` as a
misfire (over-counting, so the bound holds), a human label replaces the verdict, and
only the hits the cut serves on a scale in force count. Real migrated SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from gateway.reports.shadow_bound import shadow_bound
from gateway.reports.stats import weighted_wilson, wilson
from gateway.reports.verifier_section import verifier_html
from gateway.tenants import utc_now
from tests.gateway.test_calibration import migrated, sample

SCALES = ("en-scale", "zh-scale")
CUT = 0.98


def add(db: Any, rows: list[dict[str, Any]]) -> None:
    now = utc_now()
    with Session(db) as s, s.begin():
        for r in rows:
            model = r.get("model", "en-scale")
            row = sample(r.get("tenant", "t"), r["score"], r.get("label"), now, model)
            row.shadow_verdict = r.get("shadow")
            if "p" in r:
                row.entity_comparison = {"sampling": {"probability": r["p"]}}
            s.add(row)


def test_agree_is_correct_disagree_a_misfire_and_a_human_label_wins(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    add(
        db,
        [
            *[{"score": 0.99, "shadow": "agree"} for _ in range(40)],
            *[{"score": 0.99, "shadow": "disagree"} for _ in range(2)],
            # a reviewer overruled the shadow both ways: the labels count
            {"score": 0.995, "shadow": "disagree", "label": "correct"},
            {"score": 0.995, "shadow": "agree", "label": "misfire"},
            # none of these count:
            {"score": 0.97, "shadow": "disagree"},  # below the cut: not served by it
            {"score": 0.99, "shadow": "disagree", "model": "retired"},  # an old scale
            {"score": 0.99},  # no verdict (shadow off, or it failed), no label
            {"score": 0.99, "shadow": "disagree", "tenant": "other"},  # another tenant
        ],
    )
    bound = shadow_bound(db, "t", SCALES, CUT)
    assert bound is not None
    assert (bound.checked, bound.by_shadow, bound.counted) == (44, 42, 3)
    interval = wilson(3, 44)
    assert interval is not None
    assert bound.rate == pytest.approx(3 / 44) and bound.high == pytest.approx(interval[1])
    # Positive control for the tenant filter: the other tenant's own bound.
    other = shadow_bound(db, "other", SCALES, CUT)
    assert other is not None and (other.checked, other.counted) == (1, 1)
    # A stricter cut serves (and bounds) only what scores above it: above 0.99 only the
    # two reviewed hits, whose labels are the cut's own estimate; no shadow bound.
    assert shadow_bound(db, "t", SCALES, 0.99) is None
    looser = shadow_bound(db, "t", SCALES, 0.96)  # now the 0.97 disagreement counts too
    assert looser is not None and (looser.checked, looser.counted) == (45, 4)
    db.dispose()


def test_no_shadow_verdict_above_the_cut_gives_no_bound(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    add(db, [{"score": 0.99, "label": "correct"}, {"score": 0.5, "shadow": "agree"}])
    assert shadow_bound(db, "t", SCALES, CUT) is None  # labels alone: the cut's estimate
    assert shadow_bound(db, "nobody", SCALES, CUT) is None
    db.dispose()


def test_samples_weigh_by_their_sampling_probability(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    add(
        db,
        [
            *[{"score": 0.99, "shadow": "agree", "p": 1.0} for _ in range(30)],
            *[{"score": 0.99, "shadow": "disagree", "p": 0.5} for _ in range(3)],
        ],
    )
    bound = shadow_bound(db, "t", SCALES, CUT)
    assert bound is not None
    expected = weighted_wilson(3 * 2.0, 30 + 3 * 2.0, 30 + 3 * 4.0)
    assert expected is not None and bound.high == pytest.approx(expected[2])
    plain = wilson(3, 33)
    assert plain is not None and bound.high > plain[1]  # disagreements sampled at 1/2 weigh 2
    db.dispose()


def test_the_report_shows_the_bound_or_a_dash() -> None:
    row: dict[str, Any] = {
        "target": 0.01,
        "estimate": None,
        "low": None,
        "high": None,
        "misfires": 0,
        "served": 0,
        "cut": 0.9812,
        "source": "shipped",
        "retrieval_threshold": 0.84,
    }
    bound = {"checked": 44, "by_shadow": 42, "counted": 3, "rate": 0.068, "high": 0.1823}
    html = verifier_html({"enabled": True, "tenants": {"t": row | {"shadow_bound": bound}}})
    assert "misfire at most (shadow, 95%)" in html and "18.23% (3/44, 42 by shadow)" in html
    assert "by shadow" not in verifier_html({"enabled": True, "tenants": {"t": row}})
