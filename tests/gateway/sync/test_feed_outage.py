"""Replica sync when the database goes away: the feed of replica B reaches the real
PostgreSQL server through a TCP forwarder that the test cuts and restores, while
replica A keeps writing directly. The feed never dies, catches up without a
restart, and rebuilds from the entries table when the log it missed was pruned."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from semantic.embedder import Embedder
from semantic.models import CacheChange
from tests.gateway.failure_peers import TcpForwarder
from tests.gateway.sync.feed_support import feeding, indexed, replicas, store, wait_for
from tests.semantic.helpers import chat

pytestmark = pytest.mark.postgres

HOURS = "What are your opening hours?"
REFUND = "How long does a refund take?"


def through(pg_url: str, forwarder: TcpForwarder) -> str:
    return pg_url.replace("127.0.0.1:5432/", f"127.0.0.1:{forwarder.port}/")


def test_feed_survives_an_outage_and_catches_up(embedder: Embedder, pg_url: str) -> None:
    with (
        replicas(pg_url, embedder) as (a, b),
        TcpForwarder(("127.0.0.1", 5432)) as db,
        feeding(through(pg_url, db), b, poll_seconds=0.3) as feed,
    ):
        hours = store(a, chat(HOURS))  # control: delivered while the path is up
        assert wait_for(indexed(b, chat(HOURS), hours), timeout=3.0) is not None
        assert feed.stats()["listening"]

        db.stop()
        refund = store(a, chat(REFUND))
        assert a.invalidate(entry_id=hours) == 1
        assert wait_for(lambda: feed.stats()["errors"] >= 2, timeout=5.0) is not None
        assert not indexed(b, chat(REFUND), refund)()  # nothing gets through meanwhile
        assert indexed(b, chat(HOURS), hours)()

        db.start()  # same port: no restart of anything
        delay = wait_for(
            lambda: indexed(b, chat(REFUND), refund)() and not indexed(b, chat(HOURS), hours)(),
            timeout=10.0,
        )
        assert delay is not None, feed.stats()
        print(f"\ncaught up {delay:.2f} s after the database came back")
        assert wait_for(lambda: feed.stats()["listening"], timeout=5.0) is not None
        later = store(a, chat("Do you ship abroad?"))  # and NOTIFY works again
        assert wait_for(indexed(b, chat("Do you ship abroad?"), later), timeout=1.0) is not None
        assert feed.stats()["rebuilds"] == 0


def test_a_feed_behind_the_pruned_log_rebuilds(embedder: Embedder, pg_url: str) -> None:
    # Retention 4 s: the control's 0.3 s outage must be caught up from the log, and on a
    # loaded 2-core machine B's catch-up once came more than 1.8 s (2 s - the window)
    # after the write, which the log had pruned by then (a rebuild, failing the control).
    retention = {"window_seconds": 0.2, "retention_seconds": 4.0, "prune_every_seconds": 0}
    calls: list[frozenset[str]] = []

    def log_rows() -> int:
        with Session(a.entries.engine) as s:
            return int(s.scalar(select(func.count()).select_from(CacheChange)) or 0)

    with (
        replicas(pg_url, embedder) as (a, b),
        TcpForwarder(("127.0.0.1", 5432)) as db,
        feeding(pg_url, a, poll_seconds=0.2, **retention) as pruner,
        feeding(through(pg_url, db), b, poll_seconds=0.2, **retention) as feed,
    ):
        feed.on_tenant_change(calls.append)
        hours = store(a, chat(HOURS))
        assert wait_for(indexed(b, chat(HOURS), hours), timeout=3.0) is not None
        # Control: a short outage (under retention - window) is caught up from the log.
        db.stop()
        refund = store(a, chat(REFUND))
        time.sleep(0.3)
        db.start()
        assert wait_for(indexed(b, chat(REFUND), refund), timeout=5.0) is not None
        assert feed.stats()["rebuilds"] == 0 and calls == []

        db.stop()  # longer than the retention: A's feed prunes what B never read
        assert a.invalidate(entry_id=refund) == 1
        ships = store(a, chat("Do you ship abroad?"))
        assert wait_for(lambda: log_rows() == 0, timeout=10.0) is not None
        assert pruner.stats()["pruned"] >= 3
        time.sleep(1.0)
        db.start()
        assert wait_for(lambda: feed.stats()["rebuilds"] == 1, timeout=10.0) is not None
        assert indexed(b, chat("Do you ship abroad?"), ships)()
        assert not indexed(b, chat(REFUND), refund)()
        assert indexed(b, chat(HOURS), hours)()
        assert calls == [frozenset()]  # "anything may have changed"
