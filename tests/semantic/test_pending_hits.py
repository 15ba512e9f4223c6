"""Pending hits: a hit scored inside ``SemanticPolicy.pending_band`` waits for its
caller's check (the gateway's judge) before it is counted or slides its expiry.

A hit the judge then refuses was never served, so it must leave no trace on the
entry: counting it would show the entry as popular, and sliding its expiry would keep
alive an answer nobody received. Real embedder, real migrated SQLite file, the manual
clock; the hit counter flushes only when the test asks (``get_entry`` flushes).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.errors import WouldBlockError
from semantic.policy import SemanticPolicy
from semantic.store import EntryStore
from tests.semantic.helpers import PARAPHRASE, STORED, ManualClock, chat, reply

SLIDING = SemanticPolicy(ttl_seconds=60, sliding_ttl=True)
BAND = (0.5, 0.999)  # holds the paraphrase (~0.95), not the stored question itself (1.0)


@pytest.fixture
def cache(embedder: Embedder, store: EntryStore, clock: ManualClock) -> Iterator[SemanticCache]:
    semantic = SemanticCache(embedder, store, clock=clock, hit_flush_seconds=3600)
    yield semantic
    semantic.close()


def stored(cache: SemanticCache, policy: SemanticPolicy = SLIDING) -> int:
    result = cache.store(chat(STORED), reply(), policy)
    assert result.stored and result.entry_id is not None
    return result.entry_id


def test_a_pending_hit_is_neither_counted_nor_slid_until_confirmed(
    cache: SemanticCache, clock: ManualClock
) -> None:
    entry_id = stored(cache)
    stored_expiry = clock.now + timedelta(seconds=60)
    clock.advance(30)
    policy = replace(SLIDING, pending_band=BAND)
    pending = cache.lookup(chat(PARAPHRASE), policy)
    assert pending.hit and pending.is_pending and pending.entry_id == entry_id
    assert pending.expires_at == stored_expiry  # what it would be served with, unslid
    entry = cache.get_entry(entry_id)
    assert (entry.hit_count, entry.last_hit_at, entry.expires_at) == (0, None, stored_expiry)
    # Confirmed (the judge said yes): counted, and slid from now.
    served = cache.confirm_hit(chat(PARAPHRASE), pending, policy)
    assert served.hit and not served.is_pending and served.answer == pending.answer
    assert served.expires_at == clock.now + timedelta(seconds=60)
    entry = cache.get_entry(entry_id)
    assert (entry.hit_count, entry.last_hit_at) == (1, clock.now)
    assert entry.expires_at == clock.now + timedelta(seconds=60)


def test_outside_the_band_a_hit_is_counted_at_once(
    cache: SemanticCache, clock: ManualClock
) -> None:
    # Control for the test above: the same hit, a band that does not hold its score.
    entry_id = stored(cache)
    clock.advance(30)
    policy = replace(SLIDING, pending_band=(0.1, 0.2))
    result = cache.lookup(chat(PARAPHRASE), policy)
    assert result.hit and not result.is_pending
    assert result.expires_at == clock.now + timedelta(seconds=60)
    entry = cache.get_entry(entry_id)
    assert (entry.hit_count, entry.last_hit_at) == (1, clock.now)
    # And the stored question itself (1.0) is above BAND: served without waiting.
    assert not cache.lookup(chat(STORED), replace(SLIDING, pending_band=BAND)).is_pending


def test_a_pending_hit_whose_entry_went_meanwhile_is_a_miss(
    cache: SemanticCache, clock: ManualClock
) -> None:
    entry_id = stored(cache)
    policy = replace(SLIDING, pending_band=BAND)
    pending = cache.lookup(chat(PARAPHRASE), policy)
    assert pending.is_pending
    cache.invalidate(entry_id=entry_id)  # while the judge was asked
    gone = cache.confirm_hit(chat(PARAPHRASE), pending, policy)
    assert (gone.hit, gone.reason, gone.answer) == (False, "vanished", None)
    # ... and one that expired meanwhile
    entry_id = stored(cache)
    pending = cache.lookup(chat(PARAPHRASE), policy)
    clock.advance(61)
    late = cache.confirm_hit(chat(PARAPHRASE), pending, policy)
    assert (late.hit, late.reason) == (False, "expired")
    assert cache.get_entry(entry_id).hit_count == 0


def test_confirming_from_memory_waits_for_a_hit_written_at_once(
    cache: SemanticCache, clock: ManualClock
) -> None:
    # A sliding hit is written at once: memory alone cannot confirm it, and says so
    # having written nothing; without a slide the counter takes it in memory.
    entry_id = stored(cache)
    sliding = replace(SLIDING, pending_band=BAND)
    pending = cache.lookup(chat(PARAPHRASE), sliding)
    with pytest.raises(WouldBlockError):
        cache.confirm_hit(chat(PARAPHRASE), pending, sliding, local_only=True)
    assert cache.get_entry(entry_id).hit_count == 0
    absolute = SemanticPolicy(ttl_seconds=60, pending_band=BAND)
    pending = cache.lookup(chat(PARAPHRASE), absolute)
    assert cache.confirm_hit(chat(PARAPHRASE), pending, absolute, local_only=True).hit
    assert cache.get_entry(entry_id).hit_count == 1


def test_only_a_pending_hit_is_confirmed_and_the_band_is_checked(
    cache: SemanticCache,
) -> None:
    stored(cache)
    counted = cache.lookup(chat(PARAPHRASE), SLIDING)
    with pytest.raises(ValueError, match="pending"):
        cache.confirm_hit(chat(PARAPHRASE), counted, SLIDING)
    with pytest.raises(ValueError, match="pending_band"):
        SemanticPolicy(pending_band=(0.9, 0.8))
