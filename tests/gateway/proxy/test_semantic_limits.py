"""Per-tenant bounds on the semantic cache: the oldest make room, or the answer is
not stored — and another tenant is never touched (real embedder, real SQLite)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from gateway.policy import TenantPolicy
from gateway.proxy.semantic_limits import ENTRY_LIMIT, PARTITION_LIMIT, make_room
from migrations.runner import upgrade_database
from semantic import DEFAULT_POLICY, EntryStore, SemanticCache
from semantic.embedder import Embedder
from tests.semantic.helpers import ManualClock, chat, reply

CLOCK = ManualClock()  # entries are created one second apart: "oldest" is well defined


@pytest.fixture
def cache(embedder: Embedder, tmp_path: object) -> SemanticCache:
    url = f"sqlite:///{tmp_path}/limits.db"
    upgrade_database(url)
    return SemanticCache(embedder, EntryStore(url), clock=CLOCK)


def put(
    cache: SemanticCache, question: str, tenant: str, policy: TenantPolicy, **params: Any
) -> str | None:
    """The backfill's order: make room, then store."""
    query = chat(question, tenant=tenant, **params)
    reason = make_room(cache, tenant, cache.partition_key(query), policy)
    if reason is None:
        assert cache.store(query, reply(f"answer to {question}"), DEFAULT_POLICY).stored
        CLOCK.advance(1)
    return reason


def questions(cache: SemanticCache, tenant: str) -> list[str]:
    return sorted(e.question for e in cache.entries.iter_entries() if e.tenant == tenant)


QS = ["How do I reset my password?", "Where is my nearest branch?", "How do I order a new card?"]


def test_oldest_entries_make_room(cache: SemanticCache) -> None:
    policy = TenantPolicy(max_semantic_entries=2)
    for q in QS:
        assert put(cache, q, "a", policy) is None
    assert questions(cache, "a") == sorted(QS[1:])  # the oldest went
    assert len(cache.index) == 2  # and its vector with it


def test_skip_keeps_the_cache_as_it_was(cache: SemanticCache) -> None:
    policy = TenantPolicy(max_semantic_entries=2, semantic_limit_action="skip")
    assert [put(cache, q, "a", policy) for q in QS] == [None, None, ENTRY_LIMIT]
    assert questions(cache, "a") == sorted(QS[:2])


def test_partitions_are_bounded_too(cache: SemanticCache) -> None:
    # Odd answer-changing parameters each make a partition; they cannot grow forever.
    skip = TenantPolicy(max_semantic_partitions=2, semantic_limit_action="skip")
    assert put(cache, QS[0], "a", skip, seed=1) is None
    assert put(cache, QS[0], "a", skip, seed=2) is None
    assert put(cache, QS[0], "a", skip, seed=3) == PARTITION_LIMIT
    assert put(cache, QS[1], "a", skip, seed=2) is None  # an existing partition still takes more
    evict = TenantPolicy(max_semantic_partitions=2)
    assert put(cache, QS[2], "a", evict, seed=3) is None
    assert len(cache.entries.partition_sizes("a")) == 2
    assert [e.question for e in cache.entries.iter_entries()].count(QS[0]) == 1  # seed 1 went


def test_one_tenants_bound_never_evicts_another_tenant(cache: SemanticCache) -> None:
    policy = TenantPolicy(max_semantic_entries=1)
    assert put(cache, QS[0], "b", TenantPolicy()) is None  # positive control: b has an entry
    for q in QS:
        assert put(cache, q, "a", policy) is None
    assert questions(cache, "a") == [QS[2]]
    assert questions(cache, "b") == [QS[0]]


def test_expired_entries_do_not_count(cache: SemanticCache) -> None:
    # A tenant whose entries all expired is not stuck at its bound: they are purged.
    skip = TenantPolicy(max_semantic_entries=2, semantic_limit_action="skip", ttl_seconds=60)
    sem = skip.semantic_policy()
    for q in QS[:2]:
        query = chat(q, tenant="a")
        assert make_room(cache, "a", cache.partition_key(query), skip) is None
        assert cache.store(query, reply(q), sem).stored
    other = chat(QS[0], tenant="b")  # another tenant's expired entry is its own business
    assert cache.store(other, reply(QS[0]), sem).stored
    third = chat(QS[2], tenant="a")
    assert make_room(cache, "a", cache.partition_key(third), skip) == ENTRY_LIMIT  # control
    CLOCK.advance(3600)
    assert make_room(cache, "a", cache.partition_key(third), skip) is None
    assert questions(cache, "a") == []  # the expired ones went, index and all
    assert questions(cache, "b") == [QS[0]] and len(cache.index) == 1


def test_the_least_recently_used_entry_makes_room(embedder: Embedder, tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/lru.db"
    upgrade_database(url)
    clock = ManualClock()
    lru = SemanticCache(embedder, EntryStore(url), clock=clock, hit_flush_seconds=None)
    policy = TenantPolicy(max_semantic_entries=2)
    for q in QS[:2]:
        assert put(lru, q, "a", policy) is None
        clock.advance(10)
    # The first (oldest) entry is the one still asked: it outlives the one never hit.
    assert lru.lookup(chat("How can I reset my password?", tenant="a")).hit
    clock.advance(10)
    assert put(lru, QS[2], "a", policy) is None
    assert questions(lru, "a") == sorted([QS[0], QS[2]])


def test_concurrent_backfills_never_pass_the_bound(cache: SemanticCache) -> None:
    # Room is made and the answer stored under one hold of the write lock: ten backfills
    # of one tenant at once, bound three, never store a fourth.
    from gateway.proxy.backfill_store import store_within_bounds
    from gateway.tenants import TenantContext

    policy = TenantPolicy(max_semantic_entries=3, semantic_limit_action="skip", ttl_seconds=None)
    ctx = TenantContext("a", "a", policy, 1)
    qs = [f"What is the capital city of country number {i}?" for i in range(10)]
    vectors = cache.embedder.embed(qs)
    barrier = threading.Barrier(len(qs))
    results: list[Any] = []

    def backfill(question: str, vector: Any) -> None:
        query = chat(question, tenant="a")
        key = cache.partition_key(query)
        barrier.wait()
        results.append(
            store_within_bounds(
                cache, ctx, query, key, reply(question), policy.semantic_policy(), vector
            )
        )

    pairs = zip(qs, vectors, strict=True)
    threads = [threading.Thread(target=backfill, args=pair) for pair in pairs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.entries.count(tenant="a") == 3
    assert sorted(r.reason or "stored" for r in results) == ["entry_limit"] * 7 + ["stored"] * 3


def test_storing_a_question_held_already_is_an_update_that_needs_no_room(
    cache: SemanticCache,
) -> None:
    skip = TenantPolicy(max_semantic_entries=2, semantic_limit_action="skip")
    evict = TenantPolicy(max_semantic_entries=2)
    for q in QS[:2]:
        assert put(cache, q, "a", skip) is None
    held = chat(QS[0], tenant="a")
    assert make_room(cache, "a", cache.partition_key(held), skip, held.question) is None
    assert make_room(cache, "a", cache.partition_key(held), evict, held.question) is None
    assert questions(cache, "a") == sorted(QS[:2])  # nothing was evicted for it
    new = chat(QS[2], tenant="a")  # positive control: a new question still meets the bound
    assert make_room(cache, "a", cache.partition_key(new), skip, new.question) == ENTRY_LIMIT


def test_a_bound_lowered_far_is_reached_a_batch_at_a_time(
    cache: SemanticCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each backfill evicts at most MAX_EVICTIONS entries, in one transaction, and skips
    its own answer while the tenant is still over the bound: deleting the surplus one
    entry a transaction held the write lock for minutes (a review, session 41)."""
    import gateway.proxy.semantic_limits as limits

    monkeypatch.setattr(limits, "MAX_EVICTIONS", 2)
    many = [f"How do I change setting number {i}?" for i in range(7)]
    for q in many:
        assert put(cache, q, "a", TenantPolicy()) is None
    deletes: list[int] = []
    real_delete = cache.entries.delete

    def counted(ids: Any, **kw: Any) -> Any:
        deletes.append(len(list(ids := list(ids))))
        return real_delete(ids, **kw)

    monkeypatch.setattr(cache.entries, "delete", counted)
    lowered = TenantPolicy(max_semantic_entries=2)
    said = [put(cache, f"What is fee number {i}?", "a", lowered) for i in range(3)]
    assert said == [ENTRY_LIMIT, ENTRY_LIMIT, None]  # 7 → 5 → 3 → 1, then stored
    assert deletes == [2, 2, 2]  # one transaction a backfill
    assert len(questions(cache, "a")) == 2 and len(cache.index) == 2
    assert "What is fee number 2?" in questions(cache, "a")


def test_below_its_bounds_a_backfill_reads_counts_not_the_entries(
    cache: SemanticCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check reads the partition counts the triggers keep (migration 0015); the
    GROUP BY over the tenant's entries, 50-120 ms at 100,000 of them under the write
    lock every tenant shares, runs only where an eviction needs its order."""

    def no_scan(tenant: str) -> Any:
        raise AssertionError("the tenant's entries were grouped below its bounds")

    monkeypatch.setattr(cache.entries, "partition_sizes", no_scan)
    policy = TenantPolicy(max_semantic_entries=3, max_semantic_partitions=2)
    assert [put(cache, q, "a", policy) for q in QS] == [None, None, None]
    assert put(cache, "In another partition?", "a", policy, temperature=0.5) is None
    # control: at the partition bound, evicting a partition does read their order
    with pytest.raises(AssertionError, match="grouped"):
        put(cache, "In a third partition?", "a", policy, temperature=0.7)


def test_an_eviction_frees_a_share_of_the_bound_at_once(
    cache: SemanticCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant kept at its bound evicted one entry a backfill, each paying the ordered
    read of the least recently used; one eviction now frees EVICT_SHARE of the bound."""
    import gateway.proxy.semantic_limits as limits

    monkeypatch.setattr(limits, "EVICT_SHARE", 0.5)  # of a bound of 4: two at once
    policy = TenantPolicy(max_semantic_entries=4)
    reads: list[int] = []
    real = cache.entries.oldest_ids

    def counted(tenant: str, limit: int) -> list[int]:
        reads.append(limit)
        return real(tenant, limit)

    monkeypatch.setattr(cache.entries, "oldest_ids", counted)
    many = [f"How do I change setting number {i}?" for i in range(8)]
    assert all(put(cache, q, "a", policy) is None for q in many)
    assert reads == [2, 2]  # at the 5th and the 7th: two of four backfills read the order
    held = questions(cache, "a")
    assert len(held) == 4 and held == sorted(many[4:])  # the least recently used went
    # control: under the default share a bound of 4 frees one at a time, as before
    monkeypatch.setattr(limits, "EVICT_SHARE", 0.01)
    reads.clear()
    assert put(cache, "What is fee number 1?", "a", policy) is None
    assert reads == [1] and len(questions(cache, "a")) == 4
