"""A tenant's verifier cut while the database is away (gateway/calibration.py): the
last cut this replica computed is kept; a tenant it has none for gets cut 1.0, not
the shipped cut (which would be looser than a cut the tenant's labels had raised);
the database is retried every ``retry`` seconds, not on every lookup, and the cuts
come back from it once it answers. The outage is a real migrated SQLite database
moved away (a fresh file in its place has no tables) and moved back."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from gateway.calibration import Calibrator
from gateway.tenants import utc_now
from tests.gateway.test_calibration import migrated, sample

SHIPPED = 0.9


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Outage:
    """Moves the database file away and back; every pooled connection is dropped so
    the next read opens whatever file is at the path."""

    def __init__(self, db: Engine, path: Path) -> None:
        self.db, self.path, self.away = db, path, path.with_suffix(".away")

    def start(self) -> None:
        self.db.dispose()
        self.path.rename(self.away)

    def end(self) -> None:
        self.db.dispose()
        self.path.unlink(missing_ok=True)  # the empty file SQLite made meanwhile
        self.away.rename(self.path)


def raised_tenant(db: Engine) -> None:
    """Tenant ``r``: 20 misfires of 100 labels above the shipped cut (the labels
    disprove it: the cut is raised above them); tenant ``c``: no labels."""
    now = utc_now()
    with Session(db) as s, s.begin():
        for i in range(80):
            s.add(sample("r", 0.90 + 0.0001 * (i + 1), "correct", now))
        for i in range(20):
            s.add(sample("r", 0.91 + 0.0001 * i, "misfire", now))


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Calibrator, Outage, Clock]]:
    db = migrated(tmp_path)
    raised_tenant(db)
    clock = Clock()
    cal = Calibrator(db, lambda target: SHIPPED, ttl=60.0, clock=clock, retry=5.0)
    yield cal, Outage(db, tmp_path / "cal.db"), clock
    db.dispose()


def test_a_known_cut_is_kept_through_an_outage(setup) -> None:
    cal, outage, clock = setup
    before = cal.refresh("r", 0.01)
    assert before.source == "raised" and before.cut > 0.911  # positive control
    outage.start()
    clock.now += 3600  # long expired: still the last cut known
    assert cal.current("r", 0.01) is None
    assert cal.refresh("r", 0.01) == before
    outage.end()


def test_a_tenant_without_a_known_cut_is_served_nothing_during_an_outage(setup) -> None:
    cal, outage, clock = setup
    outage.start()
    for tenant in ("r", "c"):
        cut = cal.refresh(tenant, 0.01)
        assert (cut.source, cut.cut, cut.shipped_cut) == ("unavailable", 1.0, SHIPPED)
        assert cut.estimate is None and cut.labelled == 0
    outage.end()
    clock.now += 5.1  # the retry is due: the cuts come from the database again
    assert cal.current("r", 0.01) is None
    assert cal.refresh("r", 0.01).source == "raised"
    assert (cal.refresh("c", 0.01).source, cal.refresh("c", 0.01).cut) == ("shipped", SHIPPED)


def test_after_a_policy_change_the_outage_does_not_fall_back_to_the_shipped_cut(
    setup,
) -> None:
    # The case the rule is for: the tenant's labels had raised its cut, a policy
    # change dropped the kept cut (sync feed), then the database went away. The
    # shipped cut would serve the hits its reviewers found wrong.
    cal, outage, _clock = setup
    assert cal.refresh("r", 0.01).cut > SHIPPED
    cal.invalidate("r")
    outage.start()
    assert cal.refresh("r", 0.01).cut == 1.0
    outage.end()


def test_the_database_is_retried_every_few_seconds_not_by_every_lookup(setup, caplog) -> None:
    cal, outage, clock = setup
    reads: list[str] = []

    @event.listens_for(cal.db, "before_cursor_execute")
    def count(*args: object) -> None:
        reads.append("read")

    outage.start()
    with caplog.at_level(logging.WARNING, logger="cachegate.gateway.calibration"):
        assert cal.refresh("r", 0.01).source == "unavailable"
        tried = len(reads)
        assert tried >= 1
        clock.now += 4.9
        assert cal.current("r", 0.01) is not None  # no read: the lookup uses this
        clock.now += 0.2
        assert cal.current("r", 0.01) is None  # the retry is due
        cal.refresh("r", 0.01)
        assert len(reads) > tried
    outage.end()
    assert cal.refresh("r", 0.01).source == "raised"
    messages = [r.getMessage() for r in caplog.records]
    # logged once for the outage, not per try; no tenant id or text in it
    assert sum("unavailable" in m for m in messages) == 1
    assert not any("'r'" in m for m in messages)
