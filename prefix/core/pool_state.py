"""Read-only views of a :class:`~prefix.core.block_pool.BlockPool`: counts, stats and the
invariants tests check after every operation (``check_integrity``).

Kept apart from the mutating bookkeeping in ``block_pool.py`` so that file holds
only how blocks change state, and this one what must hold about them at any time.
The attributes are the pool's own; ``BlockPool.__init__`` sets them.
"""

from __future__ import annotations

from collections import deque

from prefix.core.eviction import EvictionPolicy
from prefix.core.hashing import short

__all__ = ["PoolState"]


class PoolState:
    """The counters, ``stats()`` and ``check_integrity()`` of a block pool."""

    _policy: EvictionPolicy
    _num_blocks: int
    _ref_count: list[int]
    _key: list[bytes | None]
    _key_to_block: dict[bytes, int]
    _parent: list[tuple[int, bytes] | None]
    _has_child: list[bool]
    _num_chains: list[int]
    _unkeyed_free: deque[int]
    _num_used: int
    _num_queries: int
    _num_hit_blocks: int
    _num_evictions: int

    # ---- counts --------------------------------------------------------

    @property
    def policy(self) -> EvictionPolicy:
        return self._policy

    @property
    def num_blocks(self) -> int:
        return self._num_blocks

    @property
    def num_free_blocks(self) -> int:
        """ref_count 0, keyed or not: what an allocation may take."""
        return len(self._unkeyed_free) + len(self._policy)

    @property
    def num_unkeyed_free_blocks(self) -> int:
        """ref_count 0 and no key: taken before any eviction."""
        return len(self._unkeyed_free)

    @property
    def num_evictable_blocks(self) -> int:
        """ref_count 0 with a key: cached, reclaimable by eviction."""
        return len(self._policy)

    @property
    def num_used_blocks(self) -> int:
        """ref_count > 0."""
        return self._num_used

    @property
    def num_cached_blocks(self) -> int:
        """Blocks with a key, whatever their ref_count."""
        return len(self._key_to_block)

    @property
    def num_queries(self) -> int:
        return self._num_queries

    @property
    def num_hit_blocks(self) -> int:
        return self._num_hit_blocks

    @property
    def num_evictions(self) -> int:
        return self._num_evictions

    def stats(self) -> dict[str, int | float]:
        return {
            "num_blocks": self._num_blocks,
            "num_free_blocks": self.num_free_blocks,
            "num_unkeyed_free_blocks": self.num_unkeyed_free_blocks,
            "num_evictable_blocks": self.num_evictable_blocks,
            "num_used_blocks": self.num_used_blocks,
            "num_cached_blocks": self.num_cached_blocks,
            "num_queries": self._num_queries,
            "num_hit_blocks": self._num_hit_blocks,
            "num_evictions": self._num_evictions,
            "hit_rate": self._num_hit_blocks / self._num_queries if self._num_queries else 0.0,
        }

    def check_integrity(self) -> None:
        """Raise AssertionError naming the first broken invariant. O(num_blocks)."""
        n = self._num_blocks
        refs = self._ref_count
        assert all(r >= 0 for r in refs), f"negative ref_count: {refs}"
        used = sum(1 for r in refs if r > 0)
        assert used == self._num_used, f"num_used_blocks {self._num_used} != {used} with ref > 0"
        assert self.num_free_blocks + used == n, (
            f"free {self.num_free_blocks} + used {used} != {n} blocks"
        )
        unkeyed = list(self._unkeyed_free)
        assert len(unkeyed) == len(set(unkeyed)), f"duplicate unkeyed free blocks: {unkeyed}"
        expected_unkeyed = {b for b in range(n) if refs[b] == 0 and self._key[b] is None}
        assert set(unkeyed) == expected_unkeyed, (
            f"unkeyed free list {sorted(unkeyed)} != ref-0 unkeyed {sorted(expected_unkeyed)}"
        )
        evictable = list(self._policy)
        assert len(evictable) == len(self._policy) == len(set(evictable)), (
            f"policy set has duplicates: {evictable}"
        )
        expected_evictable = {b for b in range(n) if refs[b] == 0 and self._key[b] is not None}
        assert set(evictable) == expected_evictable, (
            f"policy set {sorted(evictable)} != ref-0 keyed blocks {sorted(expected_evictable)}"
        )
        for key, block_id in self._key_to_block.items():
            assert self._key[block_id] == key, (
                f"key {short(key)} maps to block {block_id}, which holds {self._key[block_id]!r}"
            )
        keyed = [b for b in range(n) if self._key[b] is not None]
        assert len(keyed) == len(self._key_to_block), (
            f"{len(keyed)} keyed blocks but {len(self._key_to_block)} key mappings"
        )
        for b in range(n):
            block_key = self._key[b]
            if block_key is None:
                assert self._num_chains[b] == 0, f"unkeyed block {b} has num_chains"
                assert self._parent[b] is None, f"unkeyed block {b} has a parent link"
                assert not self._has_child[b], f"unkeyed block {b} has children"
            else:
                assert self._key_to_block.get(block_key) == b, (
                    f"block {b}'s key {short(block_key)} maps elsewhere"
                )
                assert self._num_chains[b] >= 1, f"cached block {b} has num_chains 0"
        self._policy.check_integrity({b: self._num_chains[b] for b in keyed})
