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
from gateway.calibration_ruled_out import applies, evidence_key, load_ruled_out
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


def test_a_floor_holds_until_the_threshold_passes_one_of_its_misfires(tmp_path: Path) -> None:
    """The floor the misfires at similarity 0.86 set (kept in the database) stays in force
    at any threshold up to 0.86, on a replica started since too, and under another
    embedder, whose lookups count them whatever their similarity; once the threshold
    passes them it goes (before session 48 it stayed: the cut never came down)."""
    db = seed(tmp_path)
    served_then = Calibrator(db, shipped).refresh("t", 0.01, Retrieval(EMBEDDER, 0.84))
    assert served_then.source == "raised" and load_ruled_out(db, "t", 0.01, None) > 0.98
    # a raise past no misfire keeps it; so does another embedder
    kept = [Retrieval(EMBEDDER, t) for t in (0.80, 0.84, 0.85, 0.86)]
    for retrieval in [*kept, Retrieval("other:384:z", 0.5)]:
        assert load_ruled_out(db, "t", 0.01, None, retrieval) >= served_then.cut, retrieval
        again = Calibrator(db, shipped).refresh("t", 0.01, retrieval)
        assert again.cut >= served_then.cut, retrieval
    raised = Calibrator(db, shipped).refresh("t", 0.01, Retrieval(EMBEDDER, 0.90))
    assert (raised.source, raised.cut, raised.misfires) == ("shipped", 0.98, 0)
    assert load_ruled_out(db, "t", 0.01, None, Retrieval(EMBEDDER, 0.90)) == 0.0
    db.dispose()


def test_which_floors_hold_under_a_retrieval() -> None:
    here = Retrieval(EMBEDDER, 0.9)
    rested = evidence_key(here, 0.9234567)
    assert rested == f"0.923456@{EMBEDDER}"  # rounded down: never drops a floor that holds
    assert applies(rested, here) and applies(rested, Retrieval(EMBEDDER, 0.923457))
    assert not applies(rested, Retrieval(EMBEDDER, 0.924))  # past its lowest misfire
    assert applies(rested, Retrieval("other:384:z", 0.99))  # another embedder counts them
    assert evidence_key(here, None) == "*" and evidence_key(None, 0.95) == "*"
    assert applies("*", here) and applies(rested, None)  # every label
    assert applies("garbled", here) and applies("nan@x", here)  # unreadable: kept
    long_id = "e" * 300  # an id the key cuts short still reads as its own embedder
    assert not applies(evidence_key(Retrieval(long_id, 0.8), 0.85), Retrieval(long_id, 0.9))
