"""Replica sync over the real PostgreSQL server (and SQLite): two caches with
separate in-memory indexes over one database, the real embedder, a real feed.
Every delivery is measured and bounded, and beside each one stands its control
(the same thing not delivered when the mechanism under test is off)."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import delete
from sqlalchemy.orm import Session

from gateway.sync.log import log_tenant_change
from semantic.cache import SemanticCache
from semantic.changes import DELETE, NewChange, log_changes
from semantic.embedder import Embedder
from semantic.models import SemanticEntry
from tests.gateway.sync.feed_support import feeding, hits, indexed, replicas, store, wait_for
from tests.semantic.helpers import PARAPHRASE, STORED, chat

HOURS = "What are your opening hours?"
REFUND = "How long does a refund take?"


@pytest.mark.postgres
def test_notify_delivers_at_once_where_poll_alone_would_wait(
    embedder: Embedder, pg_url: str
) -> None:
    with replicas(pg_url, embedder) as (a, b):
        # Control: LISTEN off and a 30 s poll: after its first poll, B hears nothing.
        with feeding(pg_url, b, listen=False, poll_seconds=30) as feed:
            assert feed.wait_until_caught_up(5)
            store(a, chat(HOURS))
            assert wait_for(hits(b, chat(HOURS)), timeout=1.0) is None
        # LISTEN on, the same 30 s poll: the commit's NOTIFY wakes B at once.
        with feeding(pg_url, b, poll_seconds=30) as feed:
            assert feed.wait_until_caught_up(5) and feed.stats()["listening"]
            assert b.lookup(chat(HOURS)).hit  # (its start re-read the last seconds of the log)
            assert not b.lookup(chat(PARAPHRASE)).hit
            store(a, chat(STORED))
            delay = wait_for(hits(b, chat(PARAPHRASE)), timeout=3.0)
            assert delay is not None and delay < 1.0, delay
            print(f"\nNOTIFY delivery: {delay * 1000:.0f} ms")
            # Tenant isolation through B: the entry is tenant-a's only.
            assert b.lookup(chat(PARAPHRASE, tenant="tenant-b")).reason == "empty"
            assert b.lookup(chat(STORED, tenant="tenant-a")).hit
            assert feed.stats()["errors"] == 0


@pytest.mark.postgres
def test_poll_alone_delivers_within_two_intervals(embedder: Embedder, pg_url: str) -> None:
    poll = 0.5
    with replicas(pg_url, embedder) as (a, b), feeding(pg_url, b, listen=False, poll_seconds=poll):
        assert b.lookup(chat(PARAPHRASE)).reason == "empty"
        store(a, chat(STORED))
        delay = wait_for(hits(b, chat(PARAPHRASE)), timeout=5.0)
        # Slack for the check itself: each try embeds the question and looks it up, and
        # on 2 shared cores under the whole suite that took 1.57 s once (bound was +0.5 s).
        assert delay is not None and delay < 2 * poll + 1.0, delay
        print(f"\npoll-only delivery ({poll} s poll): {delay * 1000:.0f} ms")


@pytest.mark.postgres
def test_updates_and_invalidations_reach_the_other_replica(embedder: Embedder, pg_url: str) -> None:
    terse = "You are a terse assistant."  # another system prompt: another partition
    with replicas(pg_url, embedder) as (a, b), feeding(pg_url, b, poll_seconds=1.0) as feed:
        hours = store(a, chat(HOURS))
        refund = store(a, chat(REFUND))
        elsewhere = store(a, chat(HOURS, system=terse))
        tenant_b = store(a, chat(HOURS, tenant="tenant-b"))
        assert wait_for(lambda: len(b.index) == 4, timeout=3.0) is not None
        key = b.partition_key(chat(HOURS))
        # The same question again updates its entry: B replaces the vector, no duplicate.
        assert store(a, chat(HOURS), "New hours.") == hours
        assert feed.wait_until_caught_up(5) and b.index.size(key) == 2
        assert b.lookup(chat(HOURS)).answer == a.get_entry(hours).answer

        assert a.invalidate(entry_id=hours) == 1  # one entry
        assert wait_for(lambda: not indexed(b, chat(HOURS), hours)(), timeout=3.0) is not None
        assert b.index.size(key) == 1 and b.lookup(chat(REFUND)).hit  # the other one stays

        assert a.invalidate(partition_key=key) == 1  # one partition
        assert wait_for(lambda: b.index.size(key) == 0, timeout=3.0) is not None
        assert b.lookup(chat(REFUND)).reason == "empty"
        assert b.lookup(chat(HOURS, system=terse)).hit  # another partition stays

        assert a.invalidate(tenant="tenant-a") == 1  # a whole tenant
        gone = indexed(b, chat(HOURS, system=terse), elsewhere)
        assert wait_for(lambda: not gone(), timeout=3.0) is not None
        assert b.lookup(chat(HOURS, system=terse)).reason == "empty"
        hit = b.lookup(chat(HOURS, tenant="tenant-b"))  # another tenant's entry stays
        assert hit.hit and hit.entry_id == tenant_b
        assert len(b.index) == 1 and refund not in a.entries.get_many([refund])


@pytest.mark.postgres
@pytest.mark.parametrize(("window", "replayed"), [(10.0, True), (0.05, False)])
def test_a_row_committed_after_a_later_one_is_still_replayed(
    embedder: Embedder, pg_url: str, window: float, replayed: bool
) -> None:
    """Sequence numbers are taken at insert, commits land in any order: the feed
    re-reads its overlap window. Control: a window shorter than the delay misses it."""
    with replicas(pg_url, embedder) as (a, b):
        options = {"poll_seconds": 0.1, "window_seconds": window}
        with feeding(pg_url, b, **options) as feed, Session(a.entries.engine) as slow:
            early = store(a, chat(HOURS))
            assert wait_for(indexed(b, chat(HOURS), early), timeout=3.0) is not None
            key = b.partition_key(chat(HOURS))
            with slow.begin():  # takes its seq first, commits last
                slow.execute(delete(SemanticEntry).where(SemanticEntry.id == early))
                log_changes(slow, [NewChange(DELETE, key, early)])
                # another tenant's partition: the delete holds its partition's count row
                # (migration 0015's trigger) until it commits, as any writer does
                refund = chat(REFUND, tenant="tenant-b")
                later = store(a, refund)
                assert wait_for(indexed(b, refund, later), timeout=3.0) is not None
                time.sleep(0.3)
                assert feed.wait_until_caught_up(5) and feed.stats()["last_seq"] > 2
                assert indexed(b, chat(HOURS), early)()  # not committed yet
            dropped = wait_for(lambda: not indexed(b, chat(HOURS), early)(), timeout=2.0)
            assert (dropped is not None) is replayed, feed.stats()


@pytest.mark.postgres
def test_tenant_changes_call_back_only_once_committed(embedder: Embedder, pg_url: str) -> None:
    calls: list[frozenset[str]] = []
    with replicas(pg_url, embedder) as (a, _), feeding(pg_url, None, poll_seconds=30) as feed:
        feed.on_tenant_change(calls.append)
        assert feed.wait_until_caught_up(5)
        with Session(a.entries.engine) as s:  # control: rolled back, nobody hears of it
            s.begin()
            log_tenant_change(s, "ghost")
            s.rollback()
        assert wait_for(lambda: bool(calls), timeout=1.0) is None
        with Session(a.entries.engine) as s, s.begin():
            log_tenant_change(s, "acme")
        assert wait_for(lambda: bool(calls), timeout=2.0) is not None
        assert calls == [frozenset({"acme"})]


@pytest.mark.postgres
def test_tenant_changes_do_not_wait_for_the_index_lock(embedder: Embedder, pg_url: str) -> None:
    """A snapshot or a rebuild holds the replica's index lock for seconds: a key revoked
    in the same poll as an entry change must reach the auth cache at once (it waited for
    the lock, behind the entry's replay); the entry change is applied once it is free."""
    calls: list[frozenset[str]] = []
    with replicas(pg_url, embedder) as (a, b), feeding(pg_url, b, poll_seconds=0.2) as feed:
        feed.on_tenant_change(calls.append)
        hours = store(a, chat(HOURS))
        assert wait_for(indexed(b, chat(HOURS), hours), timeout=3.0) is not None
        released = threading.Event()
        holder = threading.Thread(target=lambda: hold(b, released))
        holder.start()
        try:
            with Session(a.entries.engine) as s, s.begin():  # one poll reads both
                key = b.partition_key(chat(HOURS))
                log_changes(s, [NewChange(DELETE, key, hours)])
                log_tenant_change(s, "acme")
            # the lock is held for up to 10 s: 5 s leaves a loaded machine room (2 s
            # failed once in a full run while the test passed alone, five runs in five)
            assert wait_for(lambda: bool(calls), timeout=5.0) is not None  # lock still held
            assert indexed(b, chat(HOURS), hours)()  # the entry's change waits for it
        finally:
            released.set()
            holder.join(10)
        assert wait_for(lambda: not indexed(b, chat(HOURS), hours)(), timeout=3.0) is not None


def hold(cache: SemanticCache, released: threading.Event) -> None:
    with cache.write_lock:
        released.wait(10)


@pytest.mark.parametrize("listen", [True, False])
def test_sqlite_is_poll_only(embedder: Embedder, sqlite_url: str, listen: bool) -> None:
    poll = 0.3
    with (
        replicas(sqlite_url, embedder) as (a, b),
        feeding(sqlite_url, b, poll_seconds=poll, listen=listen) as feed,
    ):
        assert not feed.stats()["listening"]
        assert b.lookup(chat(PARAPHRASE)).reason == "empty"
        store(a, chat(STORED))
        delay = wait_for(hits(b, chat(PARAPHRASE)), timeout=3.0)
        # Slack for the check itself: each try embeds the question and looks it up, and
        # on 2 shared cores under the whole suite that took 1.57 s once (bound was +0.5 s).
        assert delay is not None and delay < 2 * poll + 1.0, delay
        a.invalidate(tenant="tenant-a")
        assert wait_for(lambda: len(b.index) == 0, timeout=3.0) is not None
