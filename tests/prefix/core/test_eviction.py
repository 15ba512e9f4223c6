"""Eviction: which cached block a BlockPool gives up first, under each policy, and the
policies (prefix/core/eviction.py) on their own (seed 000).
"""

from __future__ import annotations

from typing import Any

import pytest

from prefix.core.eviction import (
    POLICIES,
    CoverageLRUPolicy,
    LRUPolicy,
    make_policy,
)
from prefix.errors import NoFreeBlocksError
from tests.prefix.pool_support import admit, chain, make, run

# ---- allocation and eviction -----------------------------------------------


def test_unkeyed_free_blocks_go_before_any_eviction() -> None:
    # Seed 000: "若需要两块，先使用 P3，再驱逐 P2".
    evicted: list[tuple[int, bytes, int | None]] = []

    def on_evict(block_id: int, key: bytes) -> None:
        evicted.append((block_id, key, pool.lookup(key)))

    pool = make(4, on_evict=on_evict)
    keys = chain("p0", "p1", "p2")
    p0, p1, p2, p3 = pool.allocate(4)
    parent = None
    for block_id, key in zip((p0, p1, p2), keys, strict=True):
        parent = pool.commit(block_id, key, parent)
    pool.release([p3])  # never keyed: free, nothing to lose
    pool.release([p2])  # keyed: cached and reclaimable
    assert pool.allocate(2) == [p3, p2]
    assert pool.num_evictions == 1
    # The old key→block mapping is gone before the block is handed out.
    assert pool.lookup(keys[2]) is None
    assert pool.key_of(p2) is None
    assert pool.match_prefix(keys) == [p0, p1]
    assert evicted == [(p2, keys[2], None)]


def test_lru_evicts_least_recently_released_first() -> None:
    pool = make(3)
    first = run(pool, chain("x")).block_table[0]
    second = run(pool, chain("y")).block_table[0]
    third = run(pool, chain("z")).block_table[0]
    run(pool, chain("x"))  # a hit makes x the most recently used
    assert pool.allocate(1) == [second]
    assert pool.allocate(1) == [third]
    assert pool.allocate(1) == [first]
    assert pool.num_evictions == 3


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_release_is_tail_first_so_the_tail_is_evicted_first(policy: str) -> None:
    pool = make(3, policy)
    a, b, c = run(pool, chain("a", "b", "c")).block_table
    assert pool.allocate(1) == [c]
    assert pool.allocate(1) == [b]
    assert pool.allocate(1) == [a]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_pinned_blocks_are_never_evicted(policy: str) -> None:
    pool = make(4, policy)
    keys = chain("a", "b")
    old = run(pool, chain("old")).block_table  # one reclaimable cached block
    held = admit(pool, keys)  # pinned
    assert pool.allocate(1) != old  # the last unkeyed free block goes first
    assert pool.allocate(1) == old  # then the reclaimable one
    with pytest.raises(NoFreeBlocksError):
        pool.allocate(1)
    assert pool.match_prefix(keys) == list(held.block_table)
    assert pool.allocate_for_prefix(chain("new"), 1) is None


# ---- coverage policy ----------------------------------------------------------


def shared_prefix_then_cold_tail(policy: str) -> tuple[Any, bytes]:
    """3 prompts share a 1-block prefix S; then one long cold document; then pressure."""
    pool = make(10, policy)
    for i in range(3):
        run(pool, chain("S", f"private-{i}"))
    run(pool, chain(*(f"cold-{j}" for j in range(5))))
    # 1 unkeyed free block left; a new 5-block document must evict 4 cached blocks.
    run(pool, chain(*(f"new-{j}" for j in range(5))))
    return pool, chain("S")[0]


def test_coverage_keeps_a_shared_prefix_that_lru_evicts() -> None:
    lru, key_s = shared_prefix_then_cold_tail("lru")
    assert lru.num_evictions == 4
    assert lru.lookup(key_s) is None  # LRU: S is older than the cold tail
    coverage, key_s = shared_prefix_then_cold_tail("coverage")
    assert coverage.num_evictions == 4
    s = coverage.lookup(key_s)
    assert s is not None and coverage.num_chains(s) == 3
    assert coverage.match_prefix([key_s]) == [s]
    # What went instead: the three private leaves and the cold tail's last block.
    assert all(coverage.lookup(chain("S", f"private-{i}")[1]) is None for i in range(3))
    cold = chain(*(f"cold-{j}" for j in range(5)))
    assert coverage.lookup(cold[4]) is None
    assert all(coverage.lookup(k) is not None for k in cold[:4])


def test_coverage_ages_out_a_prefix_nobody_uses_any_more() -> None:
    pool, key_s = shared_prefix_then_cold_tail("coverage")
    for j in range(30):  # a stream of one-off documents
        run(pool, chain(f"stream-{j}", "x"))
    assert pool.lookup(key_s) is None


def test_coverage_evicts_leaves_before_their_parents() -> None:
    pool = make(5, "coverage")
    a, b, c = run(pool, chain("a", "b", "c")).block_table
    (d,) = run(pool, chain("a", "d")).new_block_ids  # a: 2 chains
    # Values: a=2 (two chains), b=c=d=1. Among equals the oldest release goes
    # first; tail-first release made c older than b, so b is a leaf by its turn.
    order = [pool.allocate(1)[0] for _ in range(5)]
    assert order == [4, c, b, d, a]  # the unkeyed block first, a (two chains) last


# ---- policies on their own --------------------------------------------------


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_policy_set_protocol(name: str) -> None:
    policy = make_policy(name)
    assert policy.name == name
    assert len(policy) == 0 and 1 not in policy
    with pytest.raises(IndexError):
        policy.pop_victim()
    with pytest.raises(KeyError):
        policy.remove(1)
    for block_id in (5, 3, 9):
        policy.on_chain_change(block_id, 1)
        policy.add(block_id)
    with pytest.raises(ValueError):
        policy.add(3)
    assert len(policy) == 3 and 3 in policy and set(policy) == {3, 5, 9}
    policy.remove(3)
    assert [policy.pop_victim(), policy.pop_victim()] == [5, 9]  # equal values: LRU
    with pytest.raises(IndexError):
        policy.pop_victim()


def test_make_policy_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="lru"):
        make_policy("random")


def test_coverage_orders_by_value_then_recency() -> None:
    policy = CoverageLRUPolicy()
    for block_id, value in [(1, 3), (2, 1), (3, 2), (4, 1)]:
        policy.on_chain_change(block_id, value)
        policy.add(block_id)
    policy.on_chain_change(2, 5)  # valued more now, without becoming more recent
    assert [policy.pop_victim() for _ in range(4)] == [4, 3, 1, 2]
    policy.check_integrity({1: 3, 2: 5, 3: 2, 4: 1})


def test_coverage_heap_stays_bounded_under_churn() -> None:
    policy = CoverageLRUPolicy()
    for block_id in range(10):
        policy.on_chain_change(block_id, 1)
        policy.add(block_id)
    for step in range(10_000):
        block_id = step % 10
        policy.remove(block_id)
        policy.on_chain_change(block_id, 1 + step % 3)
        policy.add(block_id)
    assert len(policy._heap) <= 2 * len(policy) + 64
    policy.check_integrity({b: 1 + (9990 + b) % 3 for b in range(10)})
    assert len({policy.pop_victim() for _ in range(10)}) == 10


def test_custom_policy_instance_is_used() -> None:
    class MRU(LRUPolicy):
        name = "mru"

        def pop_victim(self) -> int:
            if not self._order:
                raise IndexError("empty")
            return self._order.popitem(last=True)[0]

    pool = make(2, MRU())
    run(pool, chain("x"))
    run(pool, chain("y"))
    assert pool.allocate(1) == [1]
