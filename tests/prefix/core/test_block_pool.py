"""BlockPool: the block lifecycle rules of seed 000 (construction, lookup, allocation,
commit, counters, bad input). Eviction and the policies are in test_eviction.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from prefix.core.block_pool import Allocation, BlockPool
from prefix.core.eviction import (
    POLICIES,
    CoverageLRUPolicy,
    LRUPolicy,
)
from prefix.errors import NoFreeBlocksError
from tests.prefix.pool_support import REPO_ROOT, Checked, admit, chain, make, run, snapshot

# ---- construction and counts -----------------------------------------------


def test_new_pool_is_all_unkeyed_free() -> None:
    pool = make(4)
    assert pool.num_blocks == 4
    assert pool.num_free_blocks == pool.num_unkeyed_free_blocks == 4
    assert pool.num_used_blocks == pool.num_cached_blocks == pool.num_evictable_blocks == 0
    assert pool.stats() == {
        "num_blocks": 4,
        "num_free_blocks": 4,
        "num_unkeyed_free_blocks": 4,
        "num_evictable_blocks": 0,
        "num_used_blocks": 0,
        "num_cached_blocks": 0,
        "num_queries": 0,
        "num_hit_blocks": 0,
        "num_evictions": 0,
        "hit_rate": 0.0,
    }
    assert "lru" in repr(pool.pool)


@pytest.mark.parametrize("bad", [0, -1, True, 2.0])
def test_pool_size_must_be_positive_int(bad: Any) -> None:
    with pytest.raises(ValueError):
        BlockPool(bad)


def test_unknown_policy_and_non_empty_policy_are_rejected() -> None:
    with pytest.raises(ValueError):
        BlockPool(4, "fifo")
    policy = LRUPolicy()
    policy.add(0)
    with pytest.raises(ValueError):
        BlockPool(4, policy)
    assert BlockPool(4, CoverageLRUPolicy()).policy.name == "coverage"


def test_counts_through_a_request() -> None:
    pool = make(8)
    keys = chain("a", "b", "c")
    allocation = admit(pool, keys, num_private=1)
    assert allocation.hit_block_ids == ()
    assert allocation.block_table == [0, 1, 2, 3]
    assert pool.num_used_blocks == 4
    assert pool.num_cached_blocks == 3
    assert pool.num_free_blocks == pool.num_unkeyed_free_blocks == 4
    pool.release(allocation.block_table)
    assert pool.num_used_blocks == 0
    assert pool.num_cached_blocks == pool.num_evictable_blocks == 3
    assert pool.num_free_blocks == 8
    assert pool.num_unkeyed_free_blocks == 5
    assert [pool.ref_count(b) for b in range(4)] == [0, 0, 0, 0]
    assert [pool.lookup(k) for k in keys] == [0, 1, 2]
    assert pool.key_of(3) is None


def test_shared_prefixes_share_physical_blocks() -> None:
    # Seed 000: three requests, 1,024-token common prefix + 128 private tokens, B=16:
    # 64 shared + 3 x 8 private = 88 physical blocks, not 3 x 72 = 216.
    pool = make(216)
    prefix = chain(*(f"p{i}" for i in range(64)))
    tables = []
    for r in range(3):
        keys = prefix + chain(*(f"p{i}" for i in range(64)), *(f"r{r}-{j}" for j in range(8)))[64:]
        tables.append(admit(pool, keys).block_table)
    assert [len(t) for t in tables] == [72, 72, 72]
    assert pool.num_used_blocks == 88
    assert tables[0][:64] == tables[1][:64] == tables[2][:64]
    assert all(pool.ref_count(b) == 3 for b in tables[0][:64])


# ---- lookup ------------------------------------------------------------------


def test_match_stops_at_first_miss_although_later_blocks_are_cached() -> None:
    # Seed 000: chain A→B→C; A is evicted, B and C stay; a new request cannot start from B.
    pool = make(3)
    ka, kb, kc = chain("A", "B", "C")
    a, b, c = admit(pool, [ka, kb, kc]).block_table
    pool.release([a])  # only A becomes reclaimable
    assert pool.allocate(1) == [a]  # ...and is evicted
    pool.release([b, c])
    pool.release([a])
    assert pool.lookup(ka) is None
    assert pool.lookup(kb) == b and pool.lookup(kc) == c
    assert pool.match_prefix([ka, kb, kc]) == []
    assert pool.match_prefix([kb, kc]) == [b, c]  # they are there, just unreachable
    # Recompute A: the later blocks become reachable again.
    recomputed = admit(pool, [ka])
    pool.release(recomputed.block_table)
    assert pool.match_prefix([ka, kb, kc]) == [*recomputed.block_table, b, c]


def test_match_prefix_does_not_pin_or_reorder() -> None:
    pool = make(4)
    run(pool, chain("a", "b"))
    before = snapshot(pool)
    assert pool.match_prefix(chain("a", "b"), record=False) == [0, 1]
    assert snapshot(pool) == before
    assert pool.ref_count(0) == 0


# ---- allocation --------------------------------------------------------------


def test_allocate_for_prefix_pins_hits_and_counts_revived_hits() -> None:
    pool = make(4)
    keys = chain("a", "b")
    run(pool, keys)  # 2 cached reclaimable, 2 unkeyed free
    assert pool.can_allocate(4)
    assert pool.can_allocate(2, [0, 1])
    assert not pool.can_allocate(3, [0, 1])  # the hits stop being reclaimable once pinned
    allocation = pool.allocate_for_prefix(keys, 2)
    assert allocation == Allocation((0, 1), (2, 3))
    assert allocation.block_table == [0, 1, 2, 3]
    assert [pool.ref_count(b) for b in range(4)] == [1, 1, 1, 1]
    assert pool.num_evictions == 0


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_failed_allocation_changes_nothing(policy: str) -> None:
    pool = make(6, policy)
    keys = chain("a", "b", "c")
    run(pool, keys)
    run(pool, chain("d"))
    held = admit(pool, chain("e"))
    pool.match_prefix(keys)  # some counter history
    before = snapshot(pool)
    # 5 free blocks, 3 of them the hits: 3 new blocks do not fit.
    assert pool.allocate_for_prefix(keys, 3) is None
    assert snapshot(pool) == before
    with pytest.raises(NoFreeBlocksError):
        pool.allocate(6)
    assert snapshot(pool) == before
    assert held.block_table == [4]
    # ...and the same call succeeds once enough is released, counted once.
    pool.release(held.block_table)
    queries = pool.num_queries
    assert pool.allocate_for_prefix(keys, 3) is not None
    assert pool.num_queries == queries + 3


def test_allocate_zero_and_bad_counts() -> None:
    pool = make(2)
    assert pool.allocate(0) == []
    assert pool.allocate_for_prefix([], 0) == Allocation((), ())
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError):
            pool.allocate(bad)
        with pytest.raises(ValueError):
            pool.allocate_for_prefix([], bad)
        with pytest.raises(ValueError):
            pool.can_allocate(bad)


# ---- commit ------------------------------------------------------------------


def test_commit_dedupes_concurrent_computation_of_the_same_block() -> None:
    pool = make(3)
    (key,) = chain("same")
    first, second = pool.allocate(2)
    assert pool.commit(first, key, None) == first
    assert pool.commit(second, key, None) == first  # the cache keeps one copy
    assert pool.key_of(second) is None
    assert pool.lookup(key) == first
    assert pool.commit(first, key, None) == first  # idempotent
    pool.release([second])
    pool.release([first])
    assert pool.num_unkeyed_free_blocks == 2
    assert pool.allocate(2) == [2, second]  # the duplicate is reused without an eviction
    assert pool.lookup(key) == first
    assert pool.num_evictions == 0


def test_commit_rejects_misuse_without_changing_anything() -> None:
    pool = make(3)
    ka, kb = chain("a", "b")
    (block,) = pool.allocate(1)
    pool.commit(block, ka, None)
    before = snapshot(pool)
    with pytest.raises(ValueError):
        pool.commit(block, kb, None)  # a keyed block never changes key
    with pytest.raises(ValueError):
        pool.commit(1, kb, None)  # not pinned (free)
    with pytest.raises(ValueError):
        pool.commit(block, b"", None)
    with pytest.raises(ValueError):
        pool.commit(block, "key", None)
    (other,) = pool.allocate(1)
    before = snapshot(pool)
    with pytest.raises(ValueError):
        pool.commit(other, kb, other)  # its own parent
    with pytest.raises(ValueError):
        pool.commit(other, kb, 7)  # no such block
    assert snapshot(pool) == before
    pool.release([block])
    with pytest.raises(ValueError):
        pool.commit(block, ka, None)  # cached but unpinned


def test_parent_links_and_chain_counts() -> None:
    pool = make(6)
    a, b = admit(pool, chain("a", "b")).block_table
    assert pool.parent_of(b) == a and pool.parent_of(a) is None
    assert pool.num_chains(a) == pool.num_chains(b) == 1  # one chain, extended
    (c,) = admit(pool, chain("a", "c")).new_block_ids  # branches at a
    assert pool.parent_of(c) == a
    assert pool.num_chains(a) == 2 and pool.num_chains(b) == pool.num_chains(c) == 1
    (d,) = admit(pool, chain("a", "b", "d")).new_block_ids  # extends b: one more chain
    assert pool.num_chains(a) == 2 and pool.num_chains(b) == 1  # b had no child yet
    (e,) = admit(pool, chain("a", "b", "e")).new_block_ids  # branches at b
    assert [pool.num_chains(x) for x in (a, b, d, e)] == [3, 2, 1, 1]
    assert pool.num_chains(5) == 0  # never keyed


def test_a_parent_without_a_key_is_not_linked() -> None:
    pool = make(3)
    ka, kb = chain("a", "b")
    x, y = pool.allocate(2)
    pool.commit(x, ka, None)
    (z,) = pool.allocate(1)
    assert pool.commit(z, ka, None) == x  # z is a duplicate: stays unkeyed
    assert pool.commit(y, kb, z) == y  # the caller passed the duplicate as parent
    assert pool.parent_of(y) is None


def test_parent_link_dies_with_the_parent() -> None:
    pool = make(2)
    a, b = admit(pool, chain("a", "b")).block_table
    pool.release([a])
    assert pool.allocate(1) == [a]  # a evicted while b is held
    assert pool.parent_of(b) is None


# ---- counters ----------------------------------------------------------------


def test_counters_count_blocks() -> None:
    pool = make(8)
    keys = chain("a", "b", "c", "d")
    run(pool, keys[:2])  # success: 2 queried, 0 hit
    assert (pool.num_queries, pool.num_hit_blocks) == (2, 0)
    assert pool.match_prefix(keys) == [0, 1]
    assert (pool.num_queries, pool.num_hit_blocks) == (6, 2)
    pool.match_prefix(keys, record=False)
    assert (pool.num_queries, pool.num_hit_blocks) == (6, 2)
    run(pool, keys)
    assert (pool.num_queries, pool.num_hit_blocks) == (10, 4)
    assert pool.stats()["hit_rate"] == pytest.approx(0.4)
    assert pool.allocate_for_prefix(keys, 100) is None  # a failed try is not counted
    assert (pool.num_queries, pool.num_hit_blocks) == (10, 4)


# ---- bad input -----------------------------------------------------------------


def test_bad_release_raises_and_changes_nothing() -> None:
    pool = make(4)
    table = admit(pool, chain("a", "b")).block_table
    before = snapshot(pool)
    with pytest.raises(ValueError):
        pool.release([3])  # free block
    with pytest.raises(ValueError):
        pool.release([*table, table[0]])  # ref 1, released twice
    with pytest.raises(ValueError):
        pool.release([*table, 99])
    with pytest.raises(ValueError):
        pool.release([-1])
    assert snapshot(pool) == before
    pool.release(table)
    with pytest.raises(ValueError):
        pool.release(table)  # released again: ref would go below 0
    assert all(pool.ref_count(b) == 0 for b in range(4))


def test_pin_validates_first() -> None:
    pool = make(4)
    (a,) = run(pool, chain("a")).block_table
    before = snapshot(pool)
    with pytest.raises(ValueError):
        pool.pin([a, 3])  # 3 is free and unkeyed
    with pytest.raises(ValueError):
        pool.pin([a, 4])
    assert snapshot(pool) == before
    pool.pin([a, a])
    assert pool.ref_count(a) == 2
    assert pool.num_evictable_blocks == 0
    pool.release([a, a])
    assert pool.num_evictable_blocks == 1


def test_getters_validate_block_ids() -> None:
    pool = make(2)
    for getter in (pool.ref_count, pool.key_of, pool.parent_of, pool.num_chains):
        with pytest.raises(ValueError):
            getter(2)
    with pytest.raises(ValueError):
        pool.can_allocate(0, [5])
    assert pool.lookup(b"nope") is None


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda p: p._ref_count.__setitem__(0, -1),
        lambda p: p._ref_count.__setitem__(0, 1),
        lambda p: p._key_to_block.__setitem__(b"k" * 32, 1),
        lambda p: p._key.__setitem__(3, b"k" * 32),
        lambda p: p._unkeyed_free.append(2),
        lambda p: p._policy.add(2),
        lambda p: p._num_chains.__setitem__(0, 5),
        lambda p: p._policy.on_chain_change(0, 7),
    ],
)
def test_check_integrity_catches_corruption(corrupt: Callable[[BlockPool], None]) -> None:
    pool = BlockPool(4, "coverage")
    run(Checked(pool), chain("a"))
    pool.check_integrity()
    corrupt(pool)
    with pytest.raises(AssertionError):
        pool.check_integrity()


# ---- torch-free ----------------------------------------------------------------


def test_bookkeeping_modules_do_not_import_torch() -> None:
    code = (
        "import sys; import prefix.core.hashing, prefix.core.eviction, prefix.core.block_pool; "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == "False"
