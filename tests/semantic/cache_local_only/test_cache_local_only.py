"""``SemanticCache.lookup(..., local_only=True)``: the memory-only lookup the gateway
tries on the event loop before it falls back to a worker thread.

It decides from memory alone (the question's vector kept per tenant, the rows in
the store's memo, the verifier's remembered verdicts, an index no writer holds, a
hit counted in memory) and raises :class:`~semantic.errors.WouldBlockError`, having
written nothing, at the first step that would wait. When it answers, it answers
what the threaded lookup answers. Real embedder, real migrated SQLite file.

Here: the same decision, rows from the memo, hits written at once, tenants and traced
lookups. Writes: test_cache_local_only_writes.py; a partition index being changed:
test_cache_local_only_index.py; the verifier: test_cache_local_only_verifier.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.policy import SemanticPolicy
from semantic.store import EntryStore
from tests.semantic.cache_local_only.support import (
    NEW,
    OLD,
    SLIDING,
    TTL,
    UNRELATED,
    blocked,
    memoized,
    state,
    stored_id,
)
from tests.semantic.helpers import PARAPHRASE, STORED, ManualClock, chat


# -- 1. the same decision ------------------------------------------------------------
def test_local_only_makes_the_threaded_decision_and_writes_nothing_when_it_blocks(
    cache: SemanticCache,
) -> None:
    entry_id = stored_id(cache, STORED, OLD)
    # store() embedded the stored question, so its exact repeat lacks only the row;
    # a paraphrase and an unrelated question lack their vector first.
    firsts = {STORED: "store", PARAPHRASE: "embedding", UNRELATED: "embedding"}
    expected = {
        STORED: (True, None, entry_id, OLD),
        PARAPHRASE: (True, None, entry_id, OLD),
        UNRELATED: (False, "below_threshold", None, None),
    }
    for question, reason in firsts.items():
        query = chat(question)
        assert blocked(cache, query) == reason, question
        threaded = cache.lookup(query, TTL)
        local = cache.lookup(query, TTL, local_only=True)
        assert (threaded.hit, threaded.reason, threaded.entry_id, threaded.answer) == expected[
            question
        ]
        assert local == threaded, question  # score, expiry and cached question included
        assert local.embedding is not None and threaded.embedding is not None
        assert (local.embedding == threaded.embedding).all()
    # Four hits served (two threaded, two local), none by an attempt that blocked: the
    # local hits were counted in memory and reach the database with the others.
    assert cache.get_entry(entry_id).hit_count == 4


def test_a_local_miss_on_an_empty_partition_needs_no_embedding(cache: SemanticCache) -> None:
    before = state(cache)
    result = cache.lookup(chat(UNRELATED), TTL, local_only=True)
    assert (result.hit, result.reason) == (False, "empty")
    assert cache.vectors.cached("tenant-a", UNRELATED) is None
    assert state(cache) == before


# -- 2. rows come from the memo --------------------------------------------------------
def test_a_row_missing_from_the_memo_blocks_until_a_threaded_lookup_reads_it(
    cache: SemanticCache, clock: ManualClock
) -> None:
    entry_id = stored_id(cache, STORED, OLD)
    threaded = cache.lookup(chat(PARAPHRASE), TTL)
    assert threaded.hit and memoized(cache, entry_id, clock.now)
    assert cache.lookup(chat(PARAPHRASE), TTL, local_only=True) == threaded  # positive control

    cache.entries.memo.clear()
    assert blocked(cache, chat(PARAPHRASE)) == "store"
    assert cache.lookup(chat(PARAPHRASE), TTL) == threaded  # reads the row and keeps it
    assert cache.lookup(chat(PARAPHRASE), TTL, local_only=True) == threaded


def test_a_store_without_a_memo_never_answers_a_candidate_locally(
    embedder: Embedder, sqlite_url: str, clock: ManualClock
) -> None:
    no_memo = EntryStore(sqlite_url, memo_size=0)
    cache = SemanticCache(embedder, no_memo, clock=clock, hit_flush_seconds=3600)
    try:
        stored_id(cache, STORED, OLD)
        for _ in range(2):
            assert cache.lookup(chat(PARAPHRASE), TTL).hit
            assert blocked(cache, chat(PARAPHRASE)) == "store"
        # Below the threshold no row is read: that miss is still decided locally.
        assert cache.lookup(chat(UNRELATED), TTL).reason == "below_threshold"
        assert cache.lookup(chat(UNRELATED), TTL, local_only=True).reason == "below_threshold"
    finally:
        cache.close()
        no_memo.close()


# -- 5. hits that are written at once ---------------------------------------------------
def test_a_sliding_ttl_hit_blocks_locally_and_slides_when_threaded(
    cache: SemanticCache, clock: ManualClock
) -> None:
    entry_id = stored_id(cache, STORED, OLD)
    plain = cache.lookup(chat(PARAPHRASE), TTL)
    assert cache.lookup(chat(PARAPHRASE), TTL, local_only=True) == plain  # row and vector kept
    stored_expiry = cache.entries.get(entry_id).expires_at

    assert blocked(cache, chat(PARAPHRASE), SLIDING) == "store"
    assert memoized(cache, entry_id, clock.now)  # it blocked for the write, not the read
    assert cache.entries.get(entry_id).expires_at == stored_expiry

    clock.advance(30)
    slid = cache.lookup(chat(PARAPHRASE), SLIDING)
    assert slid.hit and slid.entry_id == entry_id
    assert slid.expires_at == clock.now + timedelta(seconds=3600)
    assert cache.entries.get(entry_id).expires_at == slid.expires_at  # written at once
    # A miss writes nothing, sliding or not: it is still decided locally.
    assert cache.lookup(chat(UNRELATED), SLIDING).reason == "below_threshold"
    assert cache.lookup(chat(UNRELATED), SLIDING, local_only=True).reason == "below_threshold"


def test_a_sliding_ttl_hit_on_an_entry_without_expiry_is_decided_locally(
    cache: SemanticCache, clock: ManualClock
) -> None:
    # Nothing to slide (no TTL, no expiry): the hit is only counted, in memory.
    never = SemanticPolicy(ttl_seconds=None, sliding_ttl=True)
    result = cache.store(chat(STORED), OLD, never)
    assert result.stored and result.entry_id is not None
    assert cache.entries.get(result.entry_id).expires_at is None
    threaded = cache.lookup(chat(PARAPHRASE), never)
    assert threaded.hit and threaded.expires_at is None
    pending = cache.hits.pending() if cache.hits is not None else None
    local = cache.lookup(chat(PARAPHRASE), never, local_only=True)
    assert local == threaded
    assert cache.hits is not None and cache.hits.pending() == pending  # same entry, counted
    assert cache.entries.get(result.entry_id).expires_at is None


def test_without_a_hit_counter_every_local_hit_blocks(
    embedder: Embedder, store: EntryStore, clock: ManualClock
) -> None:
    cache = SemanticCache(embedder, store, clock=clock, hit_flush_seconds=None)
    entry_id = stored_id(cache, STORED, OLD)
    assert cache.lookup(chat(PARAPHRASE), TTL).hit
    assert cache.entries.get(entry_id).hit_count == 1  # counted in the request
    assert memoized(cache, entry_id, clock.now)
    assert blocked(cache, chat(PARAPHRASE)) == "store"
    assert cache.entries.get(entry_id).hit_count == 1
    assert cache.lookup(chat(UNRELATED), TTL).reason == "below_threshold"
    assert cache.lookup(chat(UNRELATED), TTL, local_only=True).reason == "below_threshold"


# -- 8. tenants ----------------------------------------------------------------------------
def test_another_tenant_is_never_served_locally_or_threaded(cache: SemanticCache) -> None:
    a_id = stored_id(cache, STORED, OLD, tenant="tenant-a")
    a_query, b_query = chat(PARAPHRASE, tenant="tenant-a"), chat(PARAPHRASE, tenant="tenant-b")
    a_served = cache.lookup(a_query, TTL)
    assert (a_served.hit, a_served.entry_id, a_served.answer) == (True, a_id, OLD)
    assert cache.lookup(a_query, TTL, local_only=True) == a_served  # positive control

    for local_only in (True, False):
        b = cache.lookup(b_query, TTL, local_only=local_only)
        assert (b.hit, b.reason, b.answer) == (False, "empty", None)

    b_id = stored_id(cache, STORED, NEW, tenant="tenant-b")
    assert b_id != a_id
    # A's vector for the very same text is not B's: B's first local lookup must embed.
    assert blocked(cache, b_query) == "embedding"
    b_threaded = cache.lookup(b_query, TTL)
    assert (b_threaded.hit, b_threaded.entry_id, b_threaded.answer) == (True, b_id, NEW)
    assert cache.lookup(b_query, TTL, local_only=True) == b_threaded
    assert cache.lookup(a_query, TTL, local_only=True) == a_served


# -- 9. traced lookups ----------------------------------------------------------------------
def test_a_traced_lookup_is_never_local_only(cache: SemanticCache) -> None:
    with pytest.raises(ValueError, match="never local_only"):
        cache.lookup(chat(PARAPHRASE), trace=True, local_only=True)
    stored_id(cache, STORED, OLD)
    before = state(cache)
    with pytest.raises(ValueError, match="never local_only"):
        cache.lookup(chat(PARAPHRASE), trace=True, local_only=True)
    assert state(cache) == before
