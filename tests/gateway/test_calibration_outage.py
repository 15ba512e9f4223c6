"""A tenant's verifier cut while the database is away (gateway/calibrator.py): the
last cut this replica computed is kept; a tenant it has none for gets cut 1.0, not
the shipped cut (which would be looser than a cut the tenant's labels had raised);
one probe tries the database every ``retry`` seconds, not every lookup, and the cuts
come back from it once it answers. The outage is a real migrated SQLite database
moved away (a fresh file in its place has no tables) and moved back."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from gateway import calibrator, verification
from gateway.calibrator import Calibrator
from gateway.metrics import GatewayMetrics
from gateway.policy import TenantPolicy
from gateway.reports.verifier_section import verifier_html
from gateway.tenants import utc_now
from tests.gateway.test_calibration import migrated, sample

SHIPPED = 0.9
RT = {"retrieval_threshold": 0.84}
GAUGE = "cachegate_verifier_calibration_database_away "


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


class HeldRead:
    """Holds every read of ``db`` inside its cursor until released (a probe stuck in a
    dead connection); counts the reads; always released and removed on exit."""

    def __init__(self, db: Engine) -> None:
        self.db, self.reads = db, 0
        self.entered, self.release = threading.Event(), threading.Event()

    def _hold(self, *args: object) -> None:
        self.reads += 1
        self.entered.set()
        assert self.release.wait(10)

    def __enter__(self) -> HeldRead:
        event.listen(self.db, "before_cursor_execute", self._hold)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        event.remove(self.db, "before_cursor_execute", self._hold)


def in_thread(fn, *args: object) -> threading.Thread:
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


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
    kept = cal.refresh("r", 0.01)
    assert kept == replace(before, is_kept=True) and not before.is_kept
    # the report marks it, so an operator does not read a stale cut as a fresh one
    html = verifier_html({"enabled": True, "tenants": {"r": kept.to_dict() | RT}})
    assert "raised (kept: labels unreadable)" in html
    assert "(kept" not in verifier_html({"enabled": True, "tenants": {"r": before.to_dict() | RT}})
    outage.end()
    clock.now += 5.1
    assert cal.refresh("r", 0.01) == before  # read again: no longer marked kept


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


def test_the_database_is_left_alone_for_a_few_seconds_for_every_tenant(setup, caplog) -> None:
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
        # Other tenants, other targets: answered without a read until the retry is due
        # (each read can wait out a connection timeout on a worker thread).
        assert cal.refresh("acme-7f3e", 0.01).source == "unavailable"
        assert cal.refresh("r", 0.02).source == "unavailable"
        clock.now += 4.9
        assert cal.current("r", 0.01) is not None  # fresh: a lookup asks nothing
        assert cal.refresh("acme-7f3e", 0.05).cut == 1.0
        assert len(reads) == tried
        clock.now += 0.2
        assert cal.current("r", 0.01) is None  # the retry is due: one probe
        assert cal.refresh("acme-7f3e", 0.01).source == "unavailable"
        assert len(reads) > tried
        probed = len(reads)
        assert cal.refresh("r", 0.01).source == "unavailable"
        assert len(reads) == probed  # the probe failed: the next one in 10 s (doubled)
        outage.end()
        clock.now += 5.1
        assert cal.refresh("r", 0.01).source == "unavailable"
        assert len(reads) == probed  # not yet: a second failure in a row rests 10 s
        clock.now += 5.0
        assert cal.refresh("r", 0.01).source == "raised"
    # The calibrator's own records: another test's gateway still running in the
    # background (its semantic store's "unavailable") must not count here.
    messages = [r.getMessage() for r in caplog.records if r.name == calibrator.log.name]
    # logged once for the outage and once for the recovery, not per try; no tenant id
    assert sum("unavailable" in m for m in messages) == 1
    assert sum("readable again" in m for m in messages) == 1
    assert not any("acme-7f3e" in m for m in messages)


def test_one_probe_at_a_time_while_the_database_is_away(setup) -> None:
    # A probe stuck in a connection timeout must not send the lookups of other tenants
    # to the database behind it, even once it has been out longer than ``retry``.
    cal, outage, clock = setup
    outage.start()
    cal.refresh("r", 0.01)  # the database is found away
    clock.now += 5.1
    with HeldRead(cal.db) as held:
        probe = in_thread(cal.refresh, "r", 0.01)
        assert held.entered.wait(10)
        started = time.perf_counter()
        assert cal.refresh("c", 0.01).source == "unavailable"
        clock.now += 60  # the probe outlives many retries: still the only read
        assert cal.refresh("c", 0.02).source == "unavailable"
        assert time.perf_counter() - started < 1.0 and held.reads == 1
        held.release.set()
        probe.join(10)
        assert not probe.is_alive()
    outage.end()


def test_the_recovery_watch_ends_the_wait_at_once(setup) -> None:
    """The rest doubles while probes fail (5, 10, 20, 30 s), so recovery would wait up
    to 30 s; the background watch (gateway/recovery.py) calls ``retry_now`` when the
    database answers, and the next lookup probes it at once."""
    cal, outage, clock = setup
    outage.start()
    cal.refresh("r", 0.01)  # found away: 5 s
    for _ in range(3):  # three more failed probes: 10, 20, 30 s
        clock.now += 31
        assert cal.refresh("r", 0.01).source == "unavailable"
    outage.end()
    clock.now += 1
    assert cal.is_database_away and cal.refresh("r", 0.01).source == "unavailable"  # resting
    assert cal.current("r", 0.01) is not None  # what lookups use meanwhile
    assert cal.waits_for_database()  # what the watch pings for
    cal.retry_now()
    assert not cal.waits_for_database()  # told once: an idle replica is not pinged on
    assert cal.current("r", 0.01) is None  # so the next lookup reads
    assert cal.refresh("r", 0.01).source == "raised" and not cal.is_database_away


def test_the_back_off_holds_when_the_ttl_is_shorter(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    raised_tenant(db)
    clock = Clock()
    cal = Calibrator(db, lambda target: SHIPPED, ttl=1.0, clock=clock, retry=5.0)
    reads: list[str] = []
    event.listen(db, "before_cursor_execute", lambda *args: reads.append("read"))
    outage = Outage(db, tmp_path / "cal.db")
    outage.start()
    cal.refresh("r", 0.01)
    tried = len(reads)
    for _ in range(4):
        clock.now += 1.2  # past the ttl, not yet the retry
        assert cal.current("r", 0.01) is not None or cal.refresh("r", 0.01).cut == 1.0
        assert cal.refresh("c", 0.01).cut == 1.0
    assert len(reads) == tried
    outage.end()
    clock.now += 1.0
    assert cal.refresh("r", 0.01).source == "raised"
    db.dispose()


def test_a_read_failing_for_one_tenant_does_not_mark_the_database_away(
    setup, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    cal, _outage, _clock = setup
    real = calibrator.load_labels

    def failing_for_x(db, tenant_id, model=None, retrieval=None):
        if tenant_id == "x":
            raise ValueError("a bug in reading this tenant's rows")
        return real(db, tenant_id, model, retrieval)

    monkeypatch.setattr(calibrator, "load_labels", failing_for_x)
    with caplog.at_level(logging.WARNING, logger="cachegate.gateway.calibration"):
        assert cal.refresh("x", 0.01).source == "unavailable"
        assert cal.refresh("r", 0.01).source == "raised"  # read at once: no back-off
    assert not any("unavailable (" in r.getMessage() for r in caplog.records)
    assert any("read failed (ValueError)" in r.getMessage() for r in caplog.records)


def test_a_read_begun_before_a_tenant_changed_does_not_keep_its_cut(setup) -> None:
    # invalidate() (the tenant deleted, its policy or keys changed) lands while a read
    # of its labels is in flight: the cut that read computes is not kept afterwards,
    # so a tenant re-created under the id cannot inherit it.
    cal, _outage, _clock = setup
    with HeldRead(cal.db) as held:
        reader = in_thread(cal.refresh, "r", 0.01)
        assert held.entered.wait(10)
        cal.invalidate("r")
        held.release.set()
        reader.join(10)
        assert not reader.is_alive()
    assert cal.current("r", 0.01) is None
    # positive control: a read with no change meanwhile is kept
    assert cal.refresh("r", 0.01) == cal.current("r", 0.01)
    cal.invalidate()  # every tenant (the feed after a rebuild): the same
    assert cal.current("r", 0.01) is None


def test_the_gauge_shows_the_outage_and_the_recovery(setup) -> None:
    cal, outage, clock = setup
    metrics = GatewayMetrics()
    metrics.watch_calibrator(cal)

    def away() -> str:
        line = [x for x in metrics.render().decode().splitlines() if x.startswith(GAUGE)]
        return line[0].split()[-1]

    assert cal.refresh("r", 0.01).source == "raised" and away() == "0.0"
    outage.start()
    cal.refresh("r", 0.01)
    assert away() == "1.0"
    outage.end()
    clock.now += 5.1
    cal.refresh("r", 0.01)
    assert away() == "0.0"


def test_a_read_that_hangs_is_an_outage_not_a_wait(setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database that hangs fails no read: the lookup that needs a tenant's labels
    stops waiting at the deadline (gateway/db_rest.py), keeps the last cut, and the
    other tenants' lookups do not queue reads behind it."""
    cal, _outage, clock = setup
    monkeypatch.setattr(verification, "LABELS_DEADLINE", 0.3)
    checker = verification.Verification(cast(Any, None), cal, "all-MiniLM-L6-v2:384:x")
    policy = TenantPolicy(target_misfire_rate=0.01)
    before = asyncio.run(checker.cut("r", policy))
    assert before.source == "raised"  # the control: the database answers
    clock.now += 3600  # stale: the next lookup reads the labels again
    with HeldRead(cal.db) as held:

        async def lookups() -> tuple[Any, Any, float, int]:
            started = time.perf_counter()
            kept = await checker.cut("r", policy)
            other = await checker.cut("c", policy)
            waited = time.perf_counter() - started
            # Counted before the release: once released, the hung read goes on to its
            # second query (the newest and the lowest-scored labels are two), which is
            # that same read, not a lookup queued behind it (a flake before session 39).
            reads = held.reads
            held.release.set()  # the hung read's thread may end now (the loop joins it)
            return kept, other, waited, reads

        kept, other, waited, reads = asyncio.run(lookups())
    assert kept == replace(before, is_kept=True)
    assert (other.source, other.cut) == ("unavailable", 1.0)  # nothing known: none served
    assert waited < 3.0 and reads == 1
