"""Per-tenant bounds on the semantic cache: the oldest make room, or the answer is
not stored — and another tenant is never touched (real embedder, real SQLite)."""

from __future__ import annotations

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
