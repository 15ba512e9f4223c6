"""The feed's position and gaps on their own (no database), and the read of many gaps
(SQLite: one file, no server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.orm import Session

from gateway.sync.log import IN_LIST_MAX, read_missed
from gateway.sync.position import MAX_NEW_GAPS, Position
from semantic.changes import Change, NewChange, log_changes
from semantic.models import Base
from semantic.store_db import make_engine

T0 = datetime(2025, 1, 1, 12, tzinfo=UTC)
WINDOW = timedelta(seconds=10)


def rows(*seqs: int, at: datetime = T0) -> list[Change]:
    return [Change(s, at, "tenant", None, None, f"t{s}") for s in seqs]


def test_a_gap_lives_until_the_window_has_passed_its_bound() -> None:
    pos = Position()
    pos.reset(10, T0)
    pos.plan(T0 + timedelta(seconds=1), WINDOW)
    pos.advance([], rows(11, 13), T0 + timedelta(seconds=1))
    assert pos.seq == 13 and pos.open_gaps == 1
    # The next poll's clock bounds the missing row's ``at``.
    plan = pos.plan(T0 + timedelta(seconds=2), WINDOW)
    assert plan.gaps == [12] and plan.since == T0 - timedelta(seconds=9)
    pos.advance([], [], T0 + timedelta(seconds=12))
    assert pos.plan(T0 + timedelta(seconds=12), WINDOW).gaps == [12]  # since = T0 + 2 s
    pos.advance([], [], T0 + timedelta(seconds=12, milliseconds=1))
    assert pos.plan(T0 + timedelta(seconds=13), WINDOW).gaps == []  # past it: given up


def test_a_filled_gap_is_closed_and_the_floor_ends_a_window_after_the_start() -> None:
    pos = Position()
    pos.reset(10, T0)
    assert pos.plan(T0, WINDOW).floor == 10 and pos.full_window
    pos.advance(rows(9), rows(11, 13), T0)
    assert pos.unapplied(rows(8, 9)) == rows(8)  # applied below the floor: skipped
    pos.advance(rows(12), [], T0 + timedelta(seconds=1))
    assert pos.open_gaps == 0
    pos.advance([], [], T0 + timedelta(seconds=10, milliseconds=1))
    plan = pos.plan(T0 + timedelta(seconds=11), WINDOW)
    assert plan.floor is None and not pos.full_window and plan.gaps == []


def test_a_jump_in_the_sequence_reads_the_window_below_it_instead() -> None:
    pos = Position()
    pos.reset(0, T0)
    pos.plan(T0, WINDOW)
    pos.advance([], rows(1, 3), T0 + timedelta(seconds=11))
    pos.plan(T0 + timedelta(seconds=12), WINDOW)  # the start's floor has passed
    assert not pos.full_window and pos.open_gaps == 1
    far = 3 + MAX_NEW_GAPS + 3  # one more missing than it remembers one by one
    pos.advance([], rows(4, far), T0 + timedelta(seconds=12))
    assert pos.seq == far and pos.open_gaps == 0 and pos.full_window  # not 100k gaps
    assert pos.plan(T0 + timedelta(seconds=13), WINDOW).floor == far
    assert pos.unapplied(rows(2, 4, far)) == rows(2)


def test_many_gaps_are_read_as_their_range(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'log.db'}")
    Base.metadata.create_all(engine)
    try:
        with Session(engine) as s, s.begin():
            log_changes(s, [NewChange("tenant", tenant=f"t{i}") for i in range(1, 1301)])
        since = datetime.now(UTC) - timedelta(seconds=60)
        many = list(range(1, 1300, 2))  # 650 seqs: past the IN list's limit
        few = many[:IN_LIST_MAX]
        assert len(many) > IN_LIST_MAX
        with engine.connect() as conn:
            assert [c.seq for c in read_missed(conn, None, many, since)] == many
            assert [c.seq for c in read_missed(conn, None, few, since)] == few
            below = read_missed(conn, 3, [5, *many[3:]], since)
            assert [c.seq for c in below] == [1, 2, 3, 5, *many[3:]]
            later = datetime.now(UTC) + timedelta(seconds=60)
            assert read_missed(conn, 3, many, later) == []  # written before ``since``
    finally:
        engine.dispose()
