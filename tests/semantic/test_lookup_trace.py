"""The traced lookup (``trace=True``): the same decision as serving, every step
recorded, and a dry run (nothing counted, moved or deleted); and the partition
key the lookup computes is the one the store uses. Real embedder, SQLite store,
the tiny real DigitValidator; each dry run is checked against the serving lookup
that follows it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.partition import SemanticQuery
from semantic.policy import DEFAULT_POLICY, SemanticPolicy
from semantic.results import LookupResult
from semantic.store import EntryStore
from semantic.trace import LookupTrace
from tests.semantic.helpers import PARAPHRASE, STORED, DigitValidator, ManualClock, chat, reply

ORDER_1 = "What is the status of order 12345?"
ORDER_2 = "What is the status of order 12346?"
GUARDED = SemanticPolicy(guards=("time_sensitive",))


@pytest.fixture
def cache(embedder: Embedder, sqlite_url: str, clock: ManualClock) -> Iterator[SemanticCache]:
    store = EntryStore(sqlite_url)
    yield SemanticCache(embedder, store, validator=DigitValidator(), clock=clock)
    store.close()


def rows(cache: SemanticCache) -> tuple[int, int]:
    return cache.entries.count(), len(cache.index)


def dry_then_serve(
    cache: SemanticCache, query: SemanticQuery, policy: SemanticPolicy = DEFAULT_POLICY
) -> tuple[LookupTrace, LookupResult, LookupResult]:
    """The traced lookup, then the serving one: they must decide alike."""
    dry = cache.lookup(query, policy, trace=True)
    served = cache.lookup(query, policy)
    assert dry.trace is not None and served.trace is None  # serving builds no trace
    assert (dry.hit, dry.reason, dry.entry_id) == (served.hit, served.reason, served.entry_id)
    assert dry.score == served.score and dry.partition_key == served.partition_key
    return dry.trace, dry, served


def checks(trace: LookupTrace) -> list[tuple[str, bool]]:
    return [(s.check, s.passed) for s in trace.steps]


def test_a_traced_hit_counts_nothing_and_moves_no_expiry(
    cache: SemanticCache, clock: ManualClock
) -> None:
    sliding = SemanticPolicy(ttl_seconds=60, sliding_ttl=True)
    entry_id = cache.store(chat(STORED), reply(), sliding).entry_id
    assert entry_id is not None
    clock.advance(30)
    before = cache.get_entry(entry_id)
    dry = cache.lookup(chat(PARAPHRASE), sliding, trace=True)
    assert dry.hit and dry.entry_id == entry_id and dry.answer == reply()
    assert dry.trace is not None and dry.trace.served_entry_id == entry_id
    assert checks(dry.trace) == [
        ("guards", True), ("coverage", True), ("partition_not_empty", True),
        ("threshold", True), ("validators", True),
    ]  # fmt: skip
    assert dry.trace.question == PARAPHRASE and dry.trace.partition_size == 1
    (candidate,) = dry.trace.candidates
    assert candidate.entry_id == entry_id and candidate.refusal is None
    after = cache.get_entry(entry_id)
    assert (after.hit_count, after.last_hit_at, after.expires_at) == (0, None, before.expires_at)
    # Control: the serving lookup of the same question counts the hit and slides the expiry.
    served = cache.lookup(chat(PARAPHRASE), sliding)
    assert served.hit and served.entry_id == entry_id and served.score == dry.score
    counted = cache.get_entry(entry_id)
    assert counted.hit_count == 1 and counted.expires_at == clock.now + timedelta(seconds=60)


def test_a_traced_lookup_deletes_no_expired_entry(cache: SemanticCache, clock: ManualClock) -> None:
    policy = SemanticPolicy(ttl_seconds=60)
    cache.store(chat(STORED), reply(), policy)
    clock.advance(61)
    dry = cache.lookup(chat(PARAPHRASE), policy, trace=True)
    assert dry.reason == "expired" and dry.trace is not None
    assert dry.trace.steps[-1].detail == "expired"
    assert [c.refusal for c in dry.trace.candidates] == ["expired"]
    assert rows(cache) == (1, 1)  # still there: a dry run deletes nothing
    assert cache.lookup(chat(PARAPHRASE), policy).reason == "expired"
    assert rows(cache) == (0, 0)  # the serving lookup deletes it


def test_a_traced_lookup_keeps_a_vanished_entry_in_the_index(cache: SemanticCache) -> None:
    entry_id = cache.store(chat(STORED), reply()).entry_id
    assert entry_id is not None
    cache.entries.delete([entry_id])  # another replica removed the row; the index still has it
    dry = cache.lookup(chat(PARAPHRASE), trace=True)
    assert dry.reason == "empty" and dry.trace is not None  # nothing servable is left
    assert [(c.entry_id, c.refusal, c.entry) for c in dry.trace.candidates] == [
        (entry_id, "vanished", None)
    ]
    assert rows(cache) == (0, 1)  # a dry run leaves the index alone
    assert cache.lookup(chat(PARAPHRASE)).reason == "empty"
    assert rows(cache) == (0, 0)  # the serving lookup drops it


def test_a_refused_top_candidate_and_the_one_served_after_it(cache: SemanticCache) -> None:
    first = cache.store(chat(ORDER_1), reply("Shipped.")).entry_id
    second = cache.store(chat(ORDER_2), reply("Delivered.")).entry_id
    trace, dry, served = dry_then_serve(cache, chat("Status of order 12346?"))
    assert dry.hit and dry.entry_id == second and served.answer == reply("Delivered.")
    refusals = {c.entry_id: c.refusal for c in trace.candidates}
    assert refusals == {first: "entity_mismatch:number", second: None}
    trace, dry, _ = dry_then_serve(cache, chat("Status of order 12347?"))
    assert dry.reason == "entity_mismatch:number" and not dry.hit
    assert trace.steps[-1] == type(trace.steps[-1])("validators", False, "entity_mismatch:number")
    assert trace.served_entry_id is None


@pytest.mark.parametrize(
    ("query", "policy", "reason", "last_check"),
    [
        (chat("What is the latest version?"), GUARDED, "guarded:time_sensitive", "guards"),
        (chat(PARAPHRASE, tenant="tenant-b"), SemanticPolicy(), "empty", "partition_not_empty"),
        (chat(PARAPHRASE), SemanticPolicy(threshold=0.999), "below_threshold", "threshold"),
    ],
    ids=["guard", "empty-partition", "below-threshold"],
)
def test_misses_stop_at_the_step_that_failed(
    cache: SemanticCache,
    query: SemanticQuery,
    policy: SemanticPolicy,
    reason: str,
    last_check: str,
) -> None:
    cache.store(chat(STORED), reply())
    assert cache.lookup(chat(PARAPHRASE), trace=True).hit  # positive control
    trace, dry, _ = dry_then_serve(cache, query, policy)
    assert dry.reason == reason
    assert checks(trace)[-1] == (last_check, False)
    assert all(passed for _, passed in checks(trace)[:-1])
    assert trace.partition_key == cache.partition_key(query)


def test_show_widens_the_report_never_the_choice(cache: SemanticCache) -> None:
    cache.store(chat(ORDER_1), reply("Shipped."))
    cache.store(chat(ORDER_2), reply("Delivered."))
    one = SemanticPolicy(top_k=1)
    narrow = cache.lookup(chat("Status of order 12346?"), one, trace=True)
    wide = cache.lookup(chat("Status of order 12346?"), one, trace=True, show=5)
    assert narrow.trace is not None and wide.trace is not None
    assert len(narrow.trace.candidates) == 1 and len(wide.trace.candidates) == 2
    assert (wide.hit, wide.reason, wide.entry_id) == (narrow.hit, narrow.reason, narrow.entry_id)
    assert cache.lookup(chat("Status of order 12346?"), one).reason == narrow.reason


# -- the partition key: computed once, by lookup, and carried to the store ----------------
def test_the_carried_partition_key_is_the_query_partition_key(cache: SemanticCache) -> None:
    query = chat(STORED)
    miss = cache.lookup(query)
    assert miss.reason == "empty" and miss.partition_key == cache.partition_key(query)
    stored = cache.store(query, reply(), embedding=miss.embedding, partition_key=miss.partition_key)
    assert stored.partition_key == cache.partition_key(query)
    assert stored.entry_id is not None
    assert cache.get_entry(stored.entry_id).partition_key == cache.partition_key(query)
    hit = cache.lookup(chat(PARAPHRASE))
    assert hit.hit and hit.partition_key == cache.partition_key(chat(PARAPHRASE))
    other = chat(PARAPHRASE, max_tokens=7)  # another parameter set: another partition
    assert cache.lookup(other).partition_key == cache.partition_key(other) != hit.partition_key
    guarded = cache.lookup(chat("What is the latest version?"), GUARDED)
    assert guarded.partition_key == cache.partition_key(chat("What is the latest version?"))


def test_a_lookup_meeting_a_vanished_row_does_not_wait_for_a_writer(
    cache: SemanticCache,
) -> None:
    # A rebuild holds the write lock for its whole read of the table (minutes at a
    # million rows) while lookups keep searching the old partitions: dropping a vanished
    # row is a cleanup, and a lookup must not queue behind the rebuild for it.
    entry_id = cache.store(chat(STORED), reply()).entry_id
    assert entry_id is not None
    cache.entries.delete([entry_id])
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with cache.write_lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        assert held.wait(5)
        started = time.monotonic()
        assert not cache.lookup(chat(PARAPHRASE)).hit  # never the vanished row
        assert time.monotonic() - started < 5  # before: blocked until the writer let go
        assert rows(cache) == (0, 1)  # the cleanup was left for later
    finally:
        release.set()
        thread.join(10)
    assert cache.lookup(chat(PARAPHRASE)).reason == "empty"
    assert rows(cache) == (0, 0)  # control: with the lock free, the lookup drops it
