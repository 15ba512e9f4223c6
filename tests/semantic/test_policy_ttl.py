"""TTLs: absolute and sliding expiry, purging, and the policy's TTL applied at once to
entries stored before it changed.

A tenant lowers its TTL, turns one on, or switches it to sliding: every entry stored
under the old policy must follow the new one from the next lookup, not from its next
write. For a sliding TTL that means an entry idle longer than the new TTL (since its
write or its latest hit) is ``expired``, and one hit within it slides by the new TTL,
even if it was stored with no TTL at all. Real embedder, real migrated SQLite file,
the manual clock; the hit counter flushes only when a test says so, so a hit written
at once (a slide) is told apart from one counted in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import numpy as np
import pytest

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.errors import WouldBlockError
from semantic.policy import SemanticPolicy
from semantic.store import EntryStore
from tests.semantic.helpers import PARAPHRASE, STORED, ManualClock, chat, reply

SLIDING_MINUTE = SemanticPolicy(ttl_seconds=60, sliding_ttl=True)
MINUTE = timedelta(seconds=60)

#: What the entry was stored under before the tenant's policy became SLIDING_MINUTE.
STORED_UNDER = [
    pytest.param(SemanticPolicy(ttl_seconds=3600, sliding_ttl=True), id="sliding-hour"),
    pytest.param(SemanticPolicy(), id="no-ttl"),
    pytest.param(SemanticPolicy(ttl_seconds=86_400), id="absolute-day"),
]


@pytest.fixture
def cache(embedder: Embedder, store: EntryStore, clock: ManualClock) -> Iterator[SemanticCache]:
    semantic = SemanticCache(embedder, store, clock=clock, hit_flush_seconds=3600)
    yield semantic
    semantic.close()


def stored_id(cache: SemanticCache, policy: SemanticPolicy) -> int:
    result = cache.store(chat(STORED), reply(), policy)
    assert result.stored and result.entry_id is not None
    return result.entry_id


@pytest.mark.parametrize("before", STORED_UNDER)
@pytest.mark.parametrize("idle", [1800, 365 * 86_400])
def test_an_entry_idle_longer_than_the_new_sliding_ttl_is_expired(
    cache: SemanticCache, clock: ManualClock, before: SemanticPolicy, idle: int
) -> None:
    stored_id(cache, before)
    clock.advance(idle)
    if before.ttl_seconds is None or idle < before.ttl_seconds:
        # Control: the old policy still serves it (a dry run: a hit must not slide it).
        assert cache.lookup(chat(PARAPHRASE), before, trace=True).hit
    traced = cache.lookup(chat(PARAPHRASE), SLIDING_MINUTE, trace=True)  # explain agrees
    assert (traced.hit, traced.reason) == (False, "expired")
    result = cache.lookup(chat(PARAPHRASE), SLIDING_MINUTE)
    assert (result.hit, result.reason) == (False, "expired")


@pytest.mark.parametrize("before", STORED_UNDER)
def test_an_entry_hit_within_the_new_sliding_ttl_is_served_and_slides_by_it(
    cache: SemanticCache, clock: ManualClock, before: SemanticPolicy
) -> None:
    entry_id = stored_id(cache, before)
    # Hits 50 s apart keep it alive well past a minute from its write: the TTL is
    # counted from the latest hit, which each slide writes at once (and the memo of
    # the row read before it is forgotten).
    for _ in range(4):
        clock.advance(50)
        result = cache.lookup(chat(PARAPHRASE), SLIDING_MINUTE)
        assert result.hit and result.entry_id == entry_id
        assert result.expires_at == clock.now + MINUTE
        entry = cache.entries.get(entry_id)
        assert (entry.expires_at, entry.last_hit_at) == (clock.now + MINUTE, clock.now)
    clock.advance(61)
    assert cache.lookup(chat(PARAPHRASE), SLIDING_MINUTE).reason == "expired"


def test_an_entry_stored_without_ttl_starts_sliding_under_a_sliding_ttl(
    cache: SemanticCache, clock: ManualClock
) -> None:
    entry_id = stored_id(cache, SemanticPolicy())
    assert cache.entries.get(entry_id).expires_at is None
    clock.advance(30)
    # The hit must slide the expiry, which the local (memory-only) lookup cannot write.
    with pytest.raises(WouldBlockError):
        cache.lookup(chat(PARAPHRASE), SLIDING_MINUTE, local_only=True)
    result = cache.lookup(chat(PARAPHRASE), SLIDING_MINUTE)
    assert result.hit and result.expires_at == clock.now + MINUTE
    assert cache.entries.get(entry_id).expires_at == clock.now + MINUTE  # written at once
    clock.advance(61)
    # Expired by its own expiry now, so the lookup deletes it.
    assert cache.lookup(chat(PARAPHRASE), SLIDING_MINUTE).reason == "expired"
    assert cache.entries.count() == 0


def test_a_sliding_ttl_counts_from_the_latest_write(
    cache: SemanticCache, clock: ManualClock
) -> None:
    # A hit long ago, then the answer was written again (a backfill): the TTL counts
    # from the write, the later of the two.
    entry_id = stored_id(cache, SemanticPolicy())
    clock.advance(30)
    assert cache.lookup(chat(PARAPHRASE), SemanticPolicy()).hit
    assert cache.hits is not None and cache.hits.flush()
    clock.advance(3600)
    assert stored_id(cache, SemanticPolicy()) == entry_id
    clock.advance(50)
    assert cache.lookup(chat(PARAPHRASE), SLIDING_MINUTE).hit


def test_a_hit_reports_the_lowered_absolute_ttls_expiry(
    cache: SemanticCache, clock: ManualClock
) -> None:
    stored_at = clock.now
    stored_id(cache, SemanticPolicy(ttl_seconds=86_400))
    clock.advance(60)
    hour = SemanticPolicy(ttl_seconds=3600)
    result = cache.lookup(chat(PARAPHRASE), hour)
    assert result.hit and result.expires_at == stored_at + timedelta(seconds=3600)
    dry = cache.lookup(chat(PARAPHRASE), hour, trace=True)
    assert dry.hit and dry.expires_at == result.expires_at
    # Control: the entry's own expiry when it is the earlier one.
    week = SemanticPolicy(ttl_seconds=7 * 86_400)
    assert cache.lookup(chat(PARAPHRASE), week).expires_at == stored_at + timedelta(days=1)


# -- expiry under one policy -------------------------------------------------------
def rows(cache: SemanticCache) -> tuple[int, int]:
    """(rows in the database, vectors in the index): both must agree after every call."""
    return cache.entries.count(), len(cache.index)


def test_absolute_ttl_expires_and_is_removed(cache: SemanticCache, clock: ManualClock) -> None:
    policy = SemanticPolicy(ttl_seconds=60)
    cache.store(chat(STORED), reply(), policy)
    clock.advance(59)
    assert cache.lookup(chat(PARAPHRASE), policy).hit  # hits do not extend absolute expiry
    clock.advance(1)
    result = cache.lookup(chat(PARAPHRASE), policy)
    assert (result.hit, result.reason) == (False, "expired")
    assert rows(cache) == (0, 0)  # removed lazily from the store and the index
    assert cache.lookup(chat(PARAPHRASE), policy).reason == "empty"


def test_sliding_ttl_is_opt_in(cache: SemanticCache, clock: ManualClock) -> None:
    sliding = SemanticPolicy(ttl_seconds=60, sliding_ttl=True)
    cache.store(chat(STORED), reply(), sliding)
    for _ in range(3):  # 150 s in all, never 60 s without a hit
        clock.advance(50)
        result = cache.lookup(chat(PARAPHRASE), sliding)
        assert result.hit and result.expires_at == clock.now + np.timedelta64(60, "s")
    clock.advance(61)
    assert cache.lookup(chat(PARAPHRASE), sliding).reason == "expired"


def test_a_lowered_ttl_applies_to_entries_stored_before(
    cache: SemanticCache, clock: ManualClock
) -> None:
    # A tenant lowers its TTL from a day to a minute: an hour-old answer, stored with a
    # day's expiry, must not be served under the new policy.
    cache.store(chat(STORED), reply(), SemanticPolicy(ttl_seconds=86_400))
    clock.advance(3600)
    assert cache.lookup(chat(PARAPHRASE), SemanticPolicy(ttl_seconds=86_400)).hit  # control
    result = cache.lookup(chat(PARAPHRASE), SemanticPolicy(ttl_seconds=60))
    assert (result.hit, result.reason) == (False, "expired")


def test_a_lowered_sliding_ttl_slides_by_the_new_one(
    cache: SemanticCache, clock: ManualClock
) -> None:
    cache.store(chat(STORED), reply(), SemanticPolicy(ttl_seconds=3600, sliding_ttl=True))
    clock.advance(30)
    result = cache.lookup(chat(PARAPHRASE), SemanticPolicy(ttl_seconds=60, sliding_ttl=True))
    assert result.hit and result.expires_at == clock.now + np.timedelta64(60, "s")


def test_purge_expired(cache: SemanticCache, clock: ManualClock) -> None:
    cache.store(chat(STORED), reply(), SemanticPolicy(ttl_seconds=10))
    cache.store(chat("How do I close my account?"), reply("Settings."))
    clock.advance(11)
    assert cache.purge_expired() == 1
    assert rows(cache) == (1, 1)
