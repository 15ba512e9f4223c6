"""The feed reads new rows and the gaps below its position, not its whole window.

A poll used to re-read every row of the last ``window_seconds`` (10 s) to find rows
that committed after a later seq; now it remembers the seqs it found missing. Real
PostgreSQL, the feed's own polls called directly (no thread, no cache: tenant rows
and their callbacks show what was applied), and every row the feed's connection
read counted at the driver, whatever the code asks for."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

from gateway.sync.feed import ChangeFeed
from gateway.sync.log import log_tenant_change
from semantic.store_db import make_engine

pytestmark = pytest.mark.postgres


class Counted:
    """A feed over ``url`` (marked at the log's end) and the rows each poll read."""

    def __init__(self, url: str, window: float = 10.0) -> None:
        self.feed = ChangeFeed(url, None, listen=False, window_seconds=window)
        self.rows = 0
        self.tenants: list[str] = []
        self.feed.on_tenant_change(lambda names: self.tenants.extend(sorted(names)))
        event.listen(self.feed._engine, "after_cursor_execute", self._count)
        self.feed.mark()

    def _count(self, _conn: Any, cursor: Any, statement: str, *_args: Any) -> None:
        # Reads of changes (they select the op), not the one-row checks of the log's
        # head that each poll makes (gateway/sync/feed.py ``_went_back``).
        if statement.lstrip().upper().startswith("SELECT") and "cache_changes.op" in statement:
            self.rows += max(0, cursor.rowcount)  # psycopg: rows a SELECT returned

    def poll(self) -> tuple[int, list[str]]:
        """One poll: (rows it read, tenants it applied)."""
        rows, seen = self.rows, len(self.tenants)
        self.feed.sync_once()
        return self.rows - rows, self.tenants[seen:]


@pytest.fixture
def engine(pg_url: str) -> Iterator[Any]:
    engine = make_engine(pg_url)
    yield engine
    engine.dispose()


@pytest.fixture
def counted(pg_url: str) -> Iterator[Counted]:
    counted = Counted(pg_url)
    yield counted
    counted.feed.stop()


def write(engine: Any, *tenants: str) -> None:
    for tenant in tenants:  # one transaction each, as writes come
        with Session(engine) as s, s.begin():
            log_tenant_change(s, tenant)


def test_a_steady_stream_reads_each_row_once(engine: Any, counted: Counted) -> None:
    """Old code: poll k re-read all 3k rows of the window (3, 6, ... 30)."""
    read = []
    for k in range(10):
        names = [f"t{k}-{i}" for i in range(3)]
        write(engine, *names)
        rows, applied = counted.poll()
        assert applied == sorted(names)  # every new row applied, once
        read.append(rows)
    assert read == [3] * 10, read
    stats = counted.feed.stats()
    assert stats["read"] == 30 and stats["applied"] == 30 and stats["gaps"] == 0


def test_a_lower_seq_committed_late_fills_its_gap(engine: Any, counted: Counted) -> None:
    with Session(engine) as slow:
        slow.begin()
        log_tenant_change(slow, "late")  # takes its seq now, commits last
        write(engine, "early")
        assert counted.poll() == (1, ["early"])
        for k in range(3):  # the open gap costs nothing while its row is not there
            write(engine, f"n{k}")
            assert counted.poll() == (1, [f"n{k}"])  # old code: 2, 3, 4 (the window)
        assert counted.feed.stats()["gaps"] == 1
        slow.commit()
    assert counted.poll() == (1, ["late"])  # the gap's row, and nothing else
    assert counted.feed.stats()["gaps"] == 0
    assert counted.poll() == (0, [])


def test_a_gap_older_than_the_window_is_given_up(engine: Any, pg_url: str) -> None:
    """As with the window re-read: a row that commits later than the window after it
    was logged is not replayed; its gap is forgotten once nothing can fill it."""
    counted = Counted(pg_url, window=0.2)
    try:
        with Session(engine) as slow:
            slow.begin()
            log_tenant_change(slow, "too-late")
            write(engine, "early")
            assert counted.poll() == (1, ["early"])
            polls = 0
            while counted.feed.stats()["gaps"] and polls < 10:
                time.sleep(0.15)
                counted.poll()
                polls += 1
            assert counted.feed.stats()["gaps"] == 0, polls
            assert polls >= 2  # a window after the poll that bounded it, not at once
            slow.commit()
        write(engine, "after")
        assert counted.poll() == (1, ["after"])  # "too-late" is not read
    finally:
        counted.feed.stop()


def test_below_the_start_the_window_is_still_read(engine: Any, pg_url: str) -> None:
    """Which seqs below the starting position are missing is not known: for a window
    after the start every row there is read, so one that commits late still counts."""
    with Session(engine) as slow:
        slow.begin()
        log_tenant_change(slow, "before-start")
        write(engine, "committed")
        counted = Counted(pg_url)  # marks after both seqs were taken
        try:
            assert counted.poll() == (1, ["committed"])  # the window below the start
            slow.commit()
            rows, applied = counted.poll()
            assert applied == ["before-start"] and rows == 2  # ("committed" read again)
            assert counted.poll() == (2, [])  # the window there, until it has passed
        finally:
            counted.feed.stop()
