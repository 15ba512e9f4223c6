"""``lookup(..., local_only=True)`` never answers from a row a write replaced: this
replica's writes (through the cache or the store alone) forget the memoized row at once;
another replica's are served stale until replayed, and for the memo's max age at most.
Real embedder, real migrated SQLite file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from gateway.sync.log import last_seq, read_after
from semantic.cache import SemanticCache
from semantic.changes import CLEAR_PARTITION, DELETE, UPSERT, Change
from semantic.embedder import Embedder
from semantic.entry_memo import DEFAULT_MEMO_SIZE, EntryMemo
from semantic.errors import WouldBlockError
from semantic.hit_counter import PendingHits
from semantic.partition import SemanticQuery
from semantic.policy import SemanticPolicy
from semantic.replay import replay
from semantic.results import LookupResult
from semantic.store import EntryStore
from tests.semantic.cache_local_only.support import (
    NEW,
    OLD,
    SLIDING,
    TTL,
    UNRELATED,
    blocked,
    memoized,
    stored_id,
)
from tests.semantic.helpers import PARAPHRASE, STORED, ManualClock, chat


def local_or_none(
    cache: SemanticCache, query: SemanticQuery, policy: SemanticPolicy = TTL
) -> LookupResult | None:
    try:
        return cache.lookup(query, policy, local_only=True)
    except WouldBlockError:
        return None


def changes_since(cache: SemanticCache, seq: int) -> list[Change]:
    """The change log past ``seq``, read as the replica-sync feed reads it."""
    with cache.entries.engine.connect() as conn:
        return read_after(conn, seq, 1000)


def log_position(cache: SemanticCache) -> int:
    with cache.entries.engine.connect() as conn:
        return last_seq(conn)


# -- 3. this replica's writes ----------------------------------------------------------
Writer = Callable[[SemanticCache, ManualClock, int, str], None]


def _upsert(cache: SemanticCache, clock: ManualClock, entry_id: int, key: str) -> None:
    assert cache.store(chat(STORED), NEW, TTL).entry_id == entry_id


def _record_hit_slides(cache: SemanticCache, clock: ManualClock, entry_id: int, key: str) -> None:
    cache.entries.record_hit(entry_id, at=clock.now, expires_at=clock.now + timedelta(seconds=10))
    clock.advance(20)  # the memoized row's expiry is an hour away; the stored one has passed


def _record_hits_slides(cache: SemanticCache, clock: ManualClock, entry_id: int, key: str) -> None:
    slid = clock.now + timedelta(seconds=10)
    cache.entries.record_hits({entry_id: PendingHits(1, clock.now, slid)})
    clock.advance(20)


def _invalidate_entry(cache: SemanticCache, clock: ManualClock, entry_id: int, key: str) -> None:
    assert cache.invalidate(entry_id=entry_id) == 1


def _invalidate_tenant(cache: SemanticCache, clock: ManualClock, entry_id: int, key: str) -> None:
    assert cache.invalidate(tenant="tenant-a") == 1


# Writes through the store alone leave the id in this replica's index: only the
# memo's forgetting keeps the deleted row from being served.
def _store_delete(cache: SemanticCache, clock: ManualClock, entry_id: int, key: str) -> None:
    assert cache.entries.delete([entry_id]) == [(entry_id, key)]


def _store_delete_where(cache: SemanticCache, clock: ManualClock, entry_id: int, key: str) -> None:
    assert cache.entries.delete_where(partition_key=key) == [(entry_id, key)]


def _store_purge(cache: SemanticCache, clock: ManualClock, entry_id: int, key: str) -> None:
    # Purged as of two hours on, while the cache's clock (and the memoized row) is still fresh.
    assert cache.entries.purge_expired(clock.now + timedelta(hours=2)) == [(entry_id, key)]


@pytest.mark.parametrize(
    ("write", "after"),
    [
        pytest.param(_upsert, (True, None, NEW), id="cache.store-upsert"),
        pytest.param(_record_hit_slides, (False, "expired", None), id="record_hit-expiry"),
        pytest.param(_record_hits_slides, (False, "expired", None), id="record_hits-expiry"),
        pytest.param(_invalidate_entry, (False, "empty", None), id="invalidate-entry"),
        pytest.param(_invalidate_tenant, (False, "empty", None), id="invalidate-tenant"),
        pytest.param(_store_delete, (False, "empty", None), id="store.delete"),
        pytest.param(_store_delete_where, (False, "empty", None), id="store.delete_where"),
        pytest.param(_store_purge, (False, "empty", None), id="store.purge_expired"),
    ],
)
def test_a_write_through_the_store_is_never_answered_from_the_old_row(
    cache: SemanticCache,
    clock: ManualClock,
    write: Writer,
    after: tuple[bool, str | None, dict[str, Any] | None],
) -> None:
    entry_id = stored_id(cache, STORED, OLD)
    key = cache.partition_key(chat(STORED))
    assert cache.lookup(chat(PARAPHRASE), TTL).answer == OLD
    local = cache.lookup(chat(PARAPHRASE), TTL, local_only=True)
    assert local.hit and local.answer == OLD and memoized(cache, entry_id, clock.now)

    write(cache, clock, entry_id, key)

    assert not memoized(cache, entry_id, clock.now)
    local_after = local_or_none(cache, chat(PARAPHRASE))
    if local_after is not None:  # blocking is always allowed; the old answer never is
        assert local_after.answer != OLD
        assert (local_after.hit, local_after.reason, local_after.answer) == after
    threaded = cache.lookup(chat(PARAPHRASE), TTL)
    assert (threaded.hit, threaded.reason, threaded.answer) == after
    again = cache.lookup(chat(PARAPHRASE), TTL, local_only=True)
    assert again.answer != OLD
    if threaded.hit:
        assert again == threaded
    else:  # the threaded miss dropped the row from the index (or it was gone already)
        assert (again.hit, again.reason) == (False, "empty")


# -- 4. another replica's writes --------------------------------------------------------
@pytest.fixture
def replica(embedder: Embedder, sqlite_url: str, clock: ManualClock) -> Iterator[SemanticCache]:
    """A second replica: its own store (engine, memo) and index on the same file."""
    other_store = EntryStore(sqlite_url)
    other = SemanticCache(embedder, other_store, clock=clock, hit_flush_seconds=None)
    yield other
    other.close()
    other_store.close()


def _replica_updates(replica: SemanticCache, entry_id: int, key: str) -> None:
    assert replica.store(chat(STORED), NEW, TTL).entry_id == entry_id


def _replica_deletes(replica: SemanticCache, entry_id: int, key: str) -> None:
    assert replica.invalidate(entry_id=entry_id) == 1


def _replica_clears(replica: SemanticCache, entry_id: int, key: str) -> None:
    assert replica.entries.delete_where(partition_key=key) == [(entry_id, key)]


@pytest.mark.parametrize(
    ("write", "op", "after"),
    [
        pytest.param(_replica_updates, UPSERT, (True, None, NEW), id="update"),
        pytest.param(_replica_deletes, DELETE, (False, "empty", None), id="delete"),
        pytest.param(_replica_clears, CLEAR_PARTITION, (False, "empty", None), id="clear"),
    ],
)
def test_another_replicas_write_is_served_stale_until_replayed(
    cache: SemanticCache,
    replica: SemanticCache,
    clock: ManualClock,
    write: Callable[[SemanticCache, int, str], None],
    op: str,
    after: tuple[bool, str | None, dict[str, Any] | None],
) -> None:
    entry_id = stored_id(cache, STORED, OLD)
    key = cache.partition_key(chat(STORED))
    assert cache.lookup(chat(PARAPHRASE), TTL).answer == OLD
    position = log_position(cache)

    write(replica, entry_id, key)

    # Before replay this replica knows nothing of the write: the memoized row (for at
    # most the memo's max age) and this replica's index still serve the pre-change
    # answer, locally and threaded alike (README: replicas converge through replay).
    stale = cache.lookup(chat(PARAPHRASE), TTL, local_only=True)
    assert (stale.hit, stale.entry_id, stale.answer) == (True, entry_id, OLD)
    assert cache.lookup(chat(PARAPHRASE), TTL) == stale

    changes = changes_since(cache, position)
    assert [c.op for c in changes] == [op]
    replay(cache, changes)

    # The replay read the updated row again and keeps it (the memo held the old one);
    # a deleted row is not kept.
    found, _ = cache.entries.memo.get([entry_id], clock.now)
    assert [r.answer for r in found.values()] == ([NEW] if after[0] else [])
    local_after = local_or_none(cache, chat(PARAPHRASE))
    if local_after is not None:
        assert local_after.answer != OLD
        assert (local_after.hit, local_after.reason, local_after.answer) == after
    threaded = cache.lookup(chat(PARAPHRASE), TTL)
    assert (threaded.hit, threaded.reason, threaded.answer) == after
    assert cache.lookup(chat(PARAPHRASE), TTL, local_only=True) == threaded


def test_replaying_this_replicas_own_store_keeps_its_hot_row_in_memory(
    cache: SemanticCache, clock: ManualClock
) -> None:
    position = log_position(cache)
    entry_id = stored_id(cache, STORED, OLD)
    other_id = stored_id(cache, UNRELATED, NEW)
    assert cache.lookup(chat(PARAPHRASE), TTL).entry_id == entry_id  # read, memoized
    changes = changes_since(cache, position)
    assert [c.entry_id for c in changes] == [entry_id, other_id]

    # The feed replays this replica's own two stores after the hit read the first row.
    replay(cache, changes)

    assert memoized(cache, entry_id, clock.now)  # was: forgotten, the next hit read the DB
    assert not memoized(cache, other_id, clock.now)  # replay reads do not fill the memo
    local = cache.lookup(chat(PARAPHRASE), TTL, local_only=True)
    assert (local.hit, local.entry_id, local.answer) == (True, entry_id, OLD)


def test_an_expiry_slid_by_another_replica_is_read_again_not_taken_as_expired(
    cache: SemanticCache, replica: SemanticCache, clock: ManualClock
) -> None:
    # Only the entry's expiry decides here: a lookup policy with a TTL of its own would
    # also bound the answer's age (a lowered TTL applies to older entries).
    by_expiry = SemanticPolicy()
    entry_id = stored_id(cache, STORED, OLD)
    assert cache.lookup(chat(PARAPHRASE), by_expiry).hit  # memoized with the stored expiry
    clock.advance(3000)
    replica.rebuild(progress=False)
    slid = replica.lookup(chat(PARAPHRASE), SLIDING)  # written at once, no change logged
    assert slid.hit and slid.expires_at == clock.now + timedelta(seconds=3600)

    clock.advance(1000)  # past the memoized expiry, well before the slid one
    assert memoized(cache, entry_id, clock.now - timedelta(seconds=1000))
    assert blocked(cache, chat(PARAPHRASE)) == "store"  # the row must be read again
    threaded = cache.lookup(chat(PARAPHRASE), by_expiry)
    assert (threaded.hit, threaded.entry_id, threaded.expires_at) == (
        True,
        entry_id,
        slid.expires_at,
    )
    assert cache.lookup(chat(PARAPHRASE), by_expiry, local_only=True) == threaded


def test_without_replay_a_memoized_row_is_trusted_for_the_memos_max_age_only(
    cache: SemanticCache, replica: SemanticCache
) -> None:
    ticks = [time.monotonic()]
    cache.entries.memo = EntryMemo(DEFAULT_MEMO_SIZE, 10.0, clock=lambda: ticks[0])
    entry_id = stored_id(cache, STORED, OLD)
    assert cache.lookup(chat(PARAPHRASE), TTL).answer == OLD

    _replica_updates(replica, entry_id, cache.partition_key(chat(STORED)))
    ticks[0] += 9.0
    assert cache.lookup(chat(PARAPHRASE), TTL, local_only=True).answer == OLD  # within the bound
    ticks[0] += 2.0
    assert blocked(cache, chat(PARAPHRASE)) == "store"  # too old: read again
    threaded = cache.lookup(chat(PARAPHRASE), TTL)
    assert (threaded.hit, threaded.answer) == (True, NEW)
    assert cache.lookup(chat(PARAPHRASE), TTL, local_only=True) == threaded
