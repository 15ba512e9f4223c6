"""``SemanticCache.lookup(..., local_only=True)``: the memory-only lookup the gateway
tries on the event loop before it falls back to a worker thread.

It decides from memory alone (the question's vector kept per tenant, the rows in
the store's memo, the verifier's remembered verdicts, an index no writer holds, a
hit counted in memory) and raises :class:`~semantic.errors.WouldBlockError`, having
written nothing, at the first step that would wait. When it answers, it answers
what the threaded lookup answers. Real embedder, real migrated SQLite file; the
verifiers are small scripted objects (the subject is the cache's control flow; the
shipped verifier's ``remembered`` is tested in tests/validators/test_verdict_cache.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
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
from semantic.verification import VERIFIER_ERROR, VERIFIER_REFUSED, verify
from tests.semantic.helpers import PARAPHRASE, STORED, ManualClock, chat, reply

UNRELATED = "What is the weather in Paris tomorrow?"
OLD = reply("Use the 'forgot password' link.")
NEW = reply("Open Settings, then Security, then Reset.")
#: Entries stored with an expiry, so purge_expired and expiry slides have something to move.
TTL = SemanticPolicy(ttl_seconds=3600)
SLIDING = SemanticPolicy(sliding_ttl=True)
CUT = SemanticPolicy(verifier_cut=0.5)


# -- fixtures and helpers ------------------------------------------------------------
@pytest.fixture
def store(sqlite_url: str) -> Iterator[EntryStore]:
    entry_store = EntryStore(sqlite_url)
    yield entry_store
    entry_store.close()


@pytest.fixture
def cache(embedder: Embedder, store: EntryStore, clock: ManualClock) -> Iterator[SemanticCache]:
    # A flush interval no test reaches: pending hit counts stay in memory until a
    # test flushes them, so "nothing was written" can be read off the database.
    semantic = SemanticCache(embedder, store, clock=clock, hit_flush_seconds=3600)
    yield semantic
    semantic.close()


def blocked(cache: SemanticCache, query: SemanticQuery, policy: SemanticPolicy = TTL) -> str:
    """Assert the local lookup raises WouldBlockError having written nothing; its reason."""
    before = state(cache)
    with pytest.raises(WouldBlockError) as caught:
        cache.lookup(query, policy, local_only=True)
    assert state(cache) == before, "a WouldBlockError lookup wrote something"
    return caught.value.reason


def local_or_none(
    cache: SemanticCache, query: SemanticQuery, policy: SemanticPolicy = TTL
) -> LookupResult | None:
    try:
        return cache.lookup(query, policy, local_only=True)
    except WouldBlockError:
        return None


def state(cache: SemanticCache) -> tuple[Any, ...]:
    """Everything a lookup could write: rows, the change log, pending hits, the index."""
    with cache.entries.engine.connect() as conn:
        seq = last_seq(conn)
    rows = tuple(
        (e.id, e.partition_key, e.answer, e.hit_count, e.last_hit_at, e.expires_at, e.updated_at)
        for e in cache.entries.iter_entries()
    )
    pending = cache.hits.pending() if cache.hits is not None else 0
    return seq, rows, pending, {key: _size(cache, key) for key in cache.index.partitions()}


def _size(cache: SemanticCache, key: str) -> int | str:
    # Never waits: the index-busy tests call this while another thread writes.
    try:
        return cache.index.size(key, blocking=False)
    except WouldBlockError:
        return "busy"


def stored_id(
    cache: SemanticCache, question: str, answer: dict[str, Any], tenant: str = "tenant-a"
) -> int:
    result = cache.store(chat(question, tenant=tenant), answer, TTL)
    assert result.stored and result.entry_id is not None, result
    return result.entry_id


def memoized(cache: SemanticCache, entry_id: int, now: datetime) -> bool:
    found, _ = cache.entries.memo.get([entry_id], now)
    return entry_id in found


def changes_since(cache: SemanticCache, seq: int) -> list[Change]:
    """The change log past ``seq``, read as the replica-sync feed reads it."""
    with cache.entries.engine.connect() as conn:
        return read_after(conn, seq, 1000)


def log_position(cache: SemanticCache) -> int:
    with cache.entries.engine.connect() as conn:
        return last_seq(conn)


@contextmanager
def held_by_another_thread(lock: Callable[[], AbstractContextManager[Any]]) -> Iterator[None]:
    """``lock()`` entered by a second thread for the duration of the block."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock():
            taken.set()
            release.wait(10)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    try:
        assert taken.wait(5), "the other thread never took the lock"
        yield
    finally:
        release.set()
        thread.join(5)
    assert not thread.is_alive()


class Remembering:
    """A scripted verifier: ``scores`` is the forward, ``remembered`` the memory."""

    def __init__(self, score: float, known: list[float] | None) -> None:
        self.score = score
        self.known = known
        self.forwards: list[tuple[str, list[str], str]] = []
        self.recalls: list[tuple[str, list[str], str]] = []

    def scores(self, question: str, candidates: Sequence[str], scope: str = "") -> list[float]:
        self.forwards.append((question, list(candidates), scope))
        return [self.score] * len(candidates)

    def remembered(
        self, question: str, candidates: Sequence[str], scope: str = ""
    ) -> list[float] | None:
        self.recalls.append((question, list(candidates), scope))
        return None if self.known is None else list(self.known)


class ForwardOnly:
    """A verifier without ``remembered``: every verdict needs a forward."""

    def __init__(self) -> None:
        self.forwards = 0

    def scores(self, question: str, candidates: Sequence[str], scope: str = "") -> list[float]:
        self.forwards += 1
        return [0.9] * len(candidates)


class RecallRaises(Remembering):
    def __init__(self, error: Exception) -> None:
        super().__init__(0.9, [0.9])
        self.error = error

    def remembered(
        self, question: str, candidates: Sequence[str], scope: str = ""
    ) -> list[float] | None:
        raise self.error


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

    assert not memoized(cache, entry_id, clock.now)
    local_after = local_or_none(cache, chat(PARAPHRASE))
    if local_after is not None:
        assert local_after.answer != OLD
        assert (local_after.hit, local_after.reason, local_after.answer) == after
    threaded = cache.lookup(chat(PARAPHRASE), TTL)
    assert (threaded.hit, threaded.reason, threaded.answer) == after
    assert cache.lookup(chat(PARAPHRASE), TTL, local_only=True) == threaded


def test_an_expiry_slid_by_another_replica_is_read_again_not_taken_as_expired(
    cache: SemanticCache, replica: SemanticCache, clock: ManualClock
) -> None:
    entry_id = stored_id(cache, STORED, OLD)
    assert cache.lookup(chat(PARAPHRASE), TTL).hit  # memoized with the stored expiry
    clock.advance(3000)
    replica.rebuild(progress=False)
    slid = replica.lookup(chat(PARAPHRASE), SLIDING)  # written at once, no change logged
    assert slid.hit and slid.expires_at == clock.now + timedelta(seconds=3600)

    clock.advance(1000)  # past the memoized expiry, well before the slid one
    assert memoized(cache, entry_id, clock.now - timedelta(seconds=1000))
    assert blocked(cache, chat(PARAPHRASE)) == "store"  # the row must be read again
    threaded = cache.lookup(chat(PARAPHRASE), TTL)
    assert (threaded.hit, threaded.entry_id, threaded.expires_at) == (
        True,
        entry_id,
        slid.expires_at,
    )
    assert cache.lookup(chat(PARAPHRASE), TTL, local_only=True) == threaded


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


# -- 6. a partition index being changed -------------------------------------------------
def test_a_writer_on_the_partition_index_blocks_a_local_lookup_and_readers_do_not(
    cache: SemanticCache,
) -> None:
    stored_id(cache, STORED, OLD)
    query = chat(PARAPHRASE)
    index = cache.index.get(cache.partition_key(query))
    assert index is not None
    served = cache.lookup(query, TTL)
    assert cache.lookup(query, TTL, local_only=True) == served  # positive control

    with held_by_another_thread(index._lock.writing):
        assert blocked(cache, query) == "index_busy"
    with held_by_another_thread(index._lock.reading):
        assert cache.lookup(query, TTL, local_only=True) == served
    assert cache.lookup(query, TTL, local_only=True) == served


def test_a_waiting_writer_holds_local_lookups_back(cache: SemanticCache) -> None:
    stored_id(cache, STORED, OLD)
    query = chat(PARAPHRASE)
    index = cache.index.get(cache.partition_key(query))
    assert index is not None
    served = cache.lookup(query, TTL)
    lock = index._lock

    with held_by_another_thread(lock.reading):
        done = threading.Event()

        def write() -> None:
            with lock.writing():
                done.set()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        deadline = time.monotonic() + 5
        while not lock._waiting_writers and time.monotonic() < deadline:
            time.sleep(0.001)
        assert lock._waiting_writers == 1 and not done.is_set()
        assert blocked(cache, query) == "index_busy"  # a stream of reads cannot starve it
    writer.join(5)
    assert done.is_set()
    assert cache.lookup(query, TTL, local_only=True) == served


# -- 7. the verifier ----------------------------------------------------------------------
def test_local_only_serves_remembered_verdicts_and_blocks_for_a_forward(
    cache: SemanticCache,
) -> None:
    entry_id = stored_id(cache, STORED, OLD)
    query = chat(PARAPHRASE)
    scope = cache.partition_key(query)
    verifier = Remembering(0.9, known=None)
    cache.verifier = verifier
    threaded = cache.lookup(query, CUT)
    assert (threaded.hit, threaded.entry_id, threaded.verifier_score) == (True, entry_id, 0.9)
    assert verifier.forwards == [(PARAPHRASE, [STORED], scope)]

    assert blocked(cache, query, CUT) == "verifier"  # remembered() knows nothing
    assert verifier.recalls == [(PARAPHRASE, [STORED], scope)]  # scoped to the partition

    verifier.known = [0.9]
    assert cache.lookup(query, CUT, local_only=True) == threaded
    verifier.known, verifier.score = [0.2], 0.2
    refused = cache.lookup(query, CUT, local_only=True)
    assert (refused.hit, refused.reason, refused.verifier_score) == (False, VERIFIER_REFUSED, 0.2)
    assert cache.lookup(query, CUT) == refused
    assert len(verifier.forwards) == 2  # local lookups never ran a forward


def test_a_verifier_without_remembered_always_blocks_a_verified_local_lookup(
    cache: SemanticCache,
) -> None:
    stored_id(cache, STORED, OLD)
    verifier = ForwardOnly()
    cache.verifier = verifier
    for _ in range(2):
        assert cache.lookup(chat(PARAPHRASE), CUT).hit
        assert blocked(cache, chat(PARAPHRASE), CUT) == "verifier"
    assert verifier.forwards == 2
    # The stored question itself needs no verdict (it scores 1.0 unverified): local.
    assert cache.lookup(chat(STORED), CUT).hit
    exact = cache.lookup(chat(STORED), CUT, local_only=True)
    assert (exact.hit, exact.verifier_score) == (True, 1.0)
    assert verifier.forwards == 2


def test_verify_never_turns_would_block_into_a_verifier_error(cache: SemanticCache) -> None:
    with pytest.raises(WouldBlockError) as unknown:
        verify(Remembering(0.9, known=None), PARAPHRASE, [STORED], "k", local_only=True)
    assert unknown.value.reason == "verifier"
    with pytest.raises(WouldBlockError):
        verify(ForwardOnly(), PARAPHRASE, [STORED], "k", local_only=True)
    busy = RecallRaises(WouldBlockError("verdict cache busy", reason="verifier"))
    with pytest.raises(WouldBlockError):
        verify(busy, PARAPHRASE, [STORED], "k", local_only=True)
    # Any other failure still fails closed, locally as threaded.
    broken = RecallRaises(RuntimeError("boom"))
    assert verify(broken, PARAPHRASE, [STORED], "k", local_only=True) == (None, VERIFIER_ERROR)
    assert verify(Remembering(0.9, [0.9]), PARAPHRASE, [STORED], "k", local_only=True) == (
        [0.9],
        None,
    )

    # Through the cache: the lookup raises rather than answering verifier_error.
    stored_id(cache, STORED, OLD)
    cache.verifier = Remembering(0.9, known=[0.9])
    assert cache.lookup(chat(PARAPHRASE), CUT).hit
    cache.verifier = busy
    assert blocked(cache, chat(PARAPHRASE), CUT) == "verifier"


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
