"""Labels of hits a raised retrieval threshold no longer makes do not count toward a
tenant's verifier cut (gateway/calibration_labels.py): until session 47 they did, and
misfires the tenant had already removed by raising its threshold kept the cut raised
and the report's estimate high. Positive controls: the same labels count at the
threshold they were served at, and samples of another embedder (another scale) or of
none recorded count whatever their similarity. Real migrated SQLite."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from sqlalchemy.orm import Session

from gateway.calibration_labels import Retrieval, load_labels
from gateway.calibration_ruled_out import applies, load_ruled_out, retrieval_key
from gateway.calibrator import Calibrator
from gateway.policy import TenantPolicy
from gateway.tenants import utc_now
from gateway.verification import Verification
from tests.gateway.test_calibration import migrated, sample

EMBEDDER = "all-MiniLM-L6-v2:384:x"


def shipped(target: float) -> float:
    return 0.98


def seed(tmp_path: Path, misfires_from: str | None = EMBEDDER) -> Any:
    """80 clean hits at similarity 0.95 and 20 misfires at 0.86, all at verifier 0.99:
    served at threshold 0.84, the misfires rule 0.99 out at a 1% target."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    db = migrated(tmp_path)
    with Session(db) as s, s.begin():
        for i in range(100):
            misfire = i < 20
            row = sample("t", 0.99, "misfire" if misfire else "correct", utc_now())
            row.score, row.threshold = (0.86, 0.84) if misfire else (0.95, 0.84)
            row.embedder_id = misfires_from if misfire else EMBEDDER
            s.add(row)
    return db


def test_labels_below_the_threshold_in_force_do_not_count(tmp_path: Path) -> None:
    db = seed(tmp_path)
    served_then = Calibrator(db, shipped).refresh("t", 0.01, Retrieval(EMBEDDER, 0.84))
    assert (served_then.source, served_then.misfires) == ("raised", 0)  # control
    assert served_then.cut >= 0.99
    db.dispose()
    db = seed(tmp_path / "raised")
    raised = Calibrator(db, shipped).refresh("t", 0.01, Retrieval(EMBEDDER, 0.90))
    assert raised.source != "raised" and raised.cut == 0.98
    assert (raised.labelled, raised.served, raised.misfires) == (80, 80, 0)
    assert len(load_labels(db, "t")) == 100  # without a retrieval: every label
    db.dispose()


def test_another_embedders_or_an_unrecorded_ones_labels_count(tmp_path: Path) -> None:
    for i, other in enumerate(["multilingual-e5-small-q4:384:y", None]):
        db = seed(tmp_path / str(i), misfires_from=other)
        cut = Calibrator(db, shipped).refresh("t", 0.01, Retrieval(EMBEDDER, 0.90))
        assert cut.source == "raised" and cut.cut >= 0.99, other
        db.dispose()


def test_the_lookups_cut_reads_the_tenants_own_threshold(tmp_path: Path) -> None:
    for name, policy, raised in [
        ("default", TenantPolicy(), True),  # MiniLM's 0.84: the misfires count
        ("own", TenantPolicy(retrieval_threshold=0.9), False),
    ]:
        db = seed(tmp_path / name)
        checker = Verification(cast(Any, None), Calibrator(db, shipped), EMBEDDER)
        cut = asyncio.run(checker.cut("t", policy))
        assert (cut.source == "raised", cut.labelled) == (raised, 100 if raised else 80)
        db.dispose()


def test_the_report_counts_the_labels_left_below_the_threshold(tmp_path: Path) -> None:
    from gateway.calibration_labels import count_labels_below_threshold
    from gateway.reports.text import verifier_lines

    db = seed(tmp_path)
    assert count_labels_below_threshold(db, "t", None, Retrieval(EMBEDDER, 0.90)) == 20
    assert count_labels_below_threshold(db, "t", None, Retrieval(EMBEDDER, 0.84)) == 0  # control
    assert count_labels_below_threshold(db, "t", None, Retrieval("other:384:z", 0.90)) == 0
    db.dispose()
    cut = Calibrator(None, shipped).refresh("t", 0.01).to_dict()
    shown = cut | {"retrieval_threshold": 0.9, "labels_below_threshold": 20}
    lines = verifier_lines({"enabled": True, "tenants": {"t": shown}})
    assert any("20 labels below it not counted" in line for line in lines)


def test_a_floor_holds_at_its_threshold_or_below_not_above(tmp_path: Path) -> None:
    """The floor the misfires set at 0.84 (kept in the database) stays in force there and
    below, on a replica started since too, but not once the tenant raised its threshold
    past them (before session 48 it stayed: the cut never came down)."""
    db = seed(tmp_path)
    served_then = Calibrator(db, shipped).refresh("t", 0.01, Retrieval(EMBEDDER, 0.84))
    assert served_then.source == "raised" and load_ruled_out(db, "t", 0.01, None) > 0.98
    raised = Calibrator(db, shipped).refresh("t", 0.01, Retrieval(EMBEDDER, 0.90))
    assert (raised.source, raised.cut, raised.misfires) == ("shipped", 0.98, 0)
    for lower in (0.84, 0.80):  # lowered back, or below: the floor's labels count again
        again = Calibrator(db, shipped).refresh("t", 0.01, Retrieval(EMBEDDER, lower))
        assert again.cut >= served_then.cut, lower
    # another embedder's retrieval does not read this one's floor (its labels count there
    # whatever their similarity, so its own refresh raises the cut from them: the control)
    assert load_ruled_out(db, "t", 0.01, None, Retrieval("other:384:z", 0.5)) == 0.0
    assert Calibrator(db, shipped).refresh("t", 0.01, Retrieval("other:384:z", 0.5)).cut >= 0.99
    db.dispose()


def test_which_floors_hold_under_a_retrieval() -> None:
    here = Retrieval(EMBEDDER, 0.9)
    assert retrieval_key(here) == f"0.900000@{EMBEDDER}" and retrieval_key(None) == "*"
    assert applies(retrieval_key(here), here)
    assert applies(retrieval_key(Retrieval(EMBEDDER, 0.95)), here)  # a stricter one's
    assert not applies(retrieval_key(Retrieval(EMBEDDER, 0.84)), here)
    assert not applies(retrieval_key(Retrieval("other:384:z", 0.95)), here)
    assert applies("*", here) and applies(retrieval_key(here), None)  # every label
    assert applies("garbled", here) and applies("nan@x", here)  # unreadable: kept
