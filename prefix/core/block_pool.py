"""BlockPool: ref counts, keys and free lists of the physical KV blocks (no torch).

Every block is in exactly one of three states:

* used: ref_count > 0 (some block table holds it), keyed or not yet keyed;
* evictable: ref_count 0 with a key. Its KV is still valid and findable by key;
  a hit revives it. These, and only these, live in the eviction policy;
* unkeyed free: ref_count 0 without a key (never used, released before its
  block filled, or a duplicate of a block another request committed first).

"Free" (what an allocation may take) = evictable + unkeyed free. Allocation
takes unkeyed free blocks first, because reusing them loses no cache, and only
then asks the policy for a victim (seed 000: "若需要两块，先使用 P3，再驱逐 P2").
A victim's key mapping is removed before the block is handed out, so a later
lookup can never "hit" KV that is being overwritten.

Not thread-safe: one scheduler thread owns the pool.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from prefix.core.eviction import EvictionPolicy, make_policy
from prefix.core.hashing import short
from prefix.core.pool_state import PoolState
from prefix.errors import NoFreeBlocksError

__all__ = ["Allocation", "BlockPool"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Allocation:
    """The blocks one request got: pinned cache hits, then fresh blocks."""

    hit_block_ids: tuple[int, ...]
    new_block_ids: tuple[int, ...]

    @property
    def block_table(self) -> list[int]:
        """A new list the caller may extend (e.g. with decode blocks)."""
        return [*self.hit_block_ids, *self.new_block_ids]


class BlockPool(PoolState):
    """Physical block bookkeeping for the paged KV cache.

    Counters. ``num_queries`` and ``num_hit_blocks`` count *blocks*: keys
    looked up and keys that hit, so their ratio is a token-weighted hit rate,
    not a request hit rate. ``match_prefix`` counts unless ``record=False``;
    ``allocate_for_prefix`` counts only when it succeeds, so a request that
    waits and retries is counted once. ``num_evictions`` counts keyed blocks
    overwritten by an allocation.

    Coverage. On commit the caller names the block's parent (the previous
    block of the chain); the pool keeps ``num_chains`` per cached block (see
    ``CoverageLRUPolicy``) and reports changes to the policy. Parent links are
    stored with the parent's key and ignored once that key is evicted, so
    evicting a parent costs O(1) and never walks its children.

    Cost. Everything is O(1) per block (amortised), plus the policy's cost
    (O(1) for LRU, O(log n) for coverage), except ``match_prefix``
    (O(len(keys))), ``check_integrity`` (O(num_blocks)) and a ``commit`` that
    starts a new branch, which credits every ancestor: O(chain depth), about
    once per request (where its new blocks leave the cached prefix).
    """

    def __init__(
        self,
        num_blocks: int,
        policy: EvictionPolicy | str = "lru",
        *,
        on_evict: Callable[[int, bytes], None] | None = None,
    ) -> None:
        """``on_evict(block_id, old_key)`` runs after an allocation that evicted
        keyed blocks and before the caller can write to them (e.g. to copy the
        KV to a lower tier). It must not raise."""
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks <= 0:
            raise ValueError(f"num_blocks must be a positive int, got {num_blocks!r}")
        self._policy = make_policy(policy) if isinstance(policy, str) else policy
        if len(self._policy):
            raise ValueError("the eviction policy must start empty")
        self._num_blocks = num_blocks
        self._on_evict = on_evict
        self._ref_count = [0] * num_blocks
        self._key: list[bytes | None] = [None] * num_blocks
        self._key_to_block: dict[bytes, int] = {}
        # (parent id, parent key at link time): valid only while the key matches.
        self._parent: list[tuple[int, bytes] | None] = [None] * num_blocks
        self._has_child = [False] * num_blocks
        self._num_chains = [0] * num_blocks  # 0 iff unkeyed
        self._unkeyed_free: deque[int] = deque(range(num_blocks))
        self._num_used = 0
        self._num_queries = 0
        self._num_hit_blocks = 0
        self._num_evictions = 0

    # ---- lookups -------------------------------------------------------

    def match_prefix(self, keys: Sequence[bytes], *, record: bool = True) -> list[int]:
        """Block ids of the longest run of cached ``keys`` from the start.

        Stops at the first miss even if later keys are cached: without the
        missing block's KV the later blocks cannot be used (seed 000, A→B→C
        with A evicted). Pins nothing; ``record=False`` leaves the counters
        alone (a dry run before ``allocate_for_prefix``).
        """
        hits = self._match(keys)
        if record:
            self._num_queries += len(keys)
            self._num_hit_blocks += len(hits)
        return hits

    def lookup(self, key: bytes) -> int | None:
        return self._key_to_block.get(key)

    def ref_count(self, block_id: int) -> int:
        self._check_block(block_id)
        return self._ref_count[block_id]

    def key_of(self, block_id: int) -> bytes | None:
        self._check_block(block_id)
        return self._key[block_id]

    def parent_of(self, block_id: int) -> int | None:
        """The cached parent recorded at commit, or None (none given, or evicted)."""
        self._check_block(block_id)
        return self._valid_parent(block_id)

    def num_chains(self, block_id: int) -> int:
        """Chains that have branched through this cached block (0 if unkeyed)."""
        self._check_block(block_id)
        return self._num_chains[block_id]

    # ---- allocation ----------------------------------------------------

    def can_allocate(self, num_blocks: int, hit_block_ids: Sequence[int] = ()) -> bool:
        """Whether pinning ``hit_block_ids`` and then allocating ``num_blocks`` succeeds.

        Hits that are evictable now stop counting as free once pinned.
        """
        self._check_count(num_blocks)
        hits = set(hit_block_ids)
        for block_id in hits:
            self._check_block(block_id)
        num_revived = sum(1 for block_id in hits if self._ref_count[block_id] == 0)
        return num_blocks <= self.num_free_blocks - num_revived

    def allocate_for_prefix(self, keys: Sequence[bytes], num_new_blocks: int) -> Allocation | None:
        """Match, check, pin the hits and allocate ``num_new_blocks``, as one step.

        Returns None, changing nothing (counters included), when the pool
        cannot supply the blocks now; the caller waits or preempts and retries.
        Doing it in one step means a block just matched cannot be evicted by
        this very allocation or by another request in between (seed 000).
        Pass only the keys of blocks the request may reuse (e.g. not the last
        block when the whole prompt is cached and its last token must run).
        """
        self._check_count(num_new_blocks)
        hits = self._match(keys)
        if not self.can_allocate(num_new_blocks, hits):
            return None
        self._pin(hits)
        new_block_ids = self._take(num_new_blocks)
        self._num_queries += len(keys)
        self._num_hit_blocks += len(hits)
        return Allocation(tuple(hits), tuple(new_block_ids))

    def allocate(self, num_blocks: int) -> list[int]:
        """``num_blocks`` fresh blocks with ref_count 1, or NoFreeBlocksError and no change."""
        self._check_count(num_blocks)
        if num_blocks > self.num_free_blocks:
            raise NoFreeBlocksError(
                f"need {num_blocks} KV blocks, {self.num_free_blocks} of {self._num_blocks} free"
            )
        return self._take(num_blocks)

    def pin(self, block_ids: Iterable[int]) -> None:
        """ref_count +1 for each block; an evictable block leaves the policy.

        Only used or cached blocks can be pinned: an unkeyed free block holds
        nothing a caller could want (its id must be stale). Validated first, so
        a bad id changes nothing.
        """
        block_ids = list(block_ids)
        for block_id in set(block_ids):
            self._check_block(block_id)
            if self._ref_count[block_id] == 0 and self._key[block_id] is None:
                raise ValueError(f"block {block_id} is free and holds no cached KV; cannot pin it")
        self._pin(block_ids)

    def release(self, block_table: Sequence[int]) -> None:
        """ref_count -1 for each block, tail first.

        Tail first so that, among the blocks this release makes reclaimable,
        the chain's tail is the least recently used and is evicted before its
        head. Validated first: releasing a block more times than it is held
        raises ValueError and changes nothing.
        """
        for block_id, times in Counter(block_table).items():
            self._check_block(block_id)
            if self._ref_count[block_id] < times:
                raise ValueError(
                    f"block {block_id} released {times} time(s) but its ref_count is "
                    f"{self._ref_count[block_id]}"
                )
        for block_id in reversed(block_table):
            self._ref_count[block_id] -= 1
            if self._ref_count[block_id] == 0:
                self._num_used -= 1
                if self._key[block_id] is None:
                    self._unkeyed_free.append(block_id)
                else:
                    self._policy.add(block_id)

    def commit(self, block_id: int, key: bytes, parent_block_id: int | None) -> int:
        """Attach ``key`` to a pinned block that just became full; return the cached id.

        If another block already holds ``key`` (two requests computed the same
        block at once), this block stays unkeyed and the existing block's id is
        returned: the cache keeps one copy, and this block becomes unkeyed free
        when released (the caller may keep reading its own identical copy).

        ``parent_block_id`` is the previous block of the chain, None for the
        first. The caller's own previous block is always safe (the caller pins
        it, so the id cannot be stale); a parent without a key (a duplicate) is
        simply not linked, which only costs the coverage policy one link. The
        id an earlier commit returned links better but is only valid while
        that block is still cached. Re-committing the same key is a no-op; a
        different key on a keyed block raises ValueError.
        """
        self._check_block(block_id)
        if not isinstance(key, bytes) or not key:
            raise ValueError(f"a block key is non-empty bytes, got {key!r}")
        if self._ref_count[block_id] == 0:
            raise ValueError(f"block {block_id} is not pinned; only a held block can be committed")
        if parent_block_id is not None:
            self._check_block(parent_block_id)
            if parent_block_id == block_id:
                raise ValueError(f"block {block_id} cannot be its own parent")
        current = self._key[block_id]
        if current is not None:
            if current == key:
                return block_id
            raise ValueError(
                f"block {block_id} already holds key {short(current)}, not {short(key)}"
            )
        existing = self._key_to_block.get(key)
        if existing is not None:
            return existing
        self._key[block_id] = key
        self._key_to_block[key] = block_id
        self._set_num_chains(block_id, 1)
        if parent_block_id is not None:
            parent_key = self._key[parent_block_id]
            if parent_key is not None:
                self._parent[block_id] = (parent_block_id, parent_key)
                if self._has_child[parent_block_id]:
                    self._add_chain(parent_block_id)  # a new branch
                else:
                    self._has_child[parent_block_id] = True  # the same chain, extended
        return block_id

    def __repr__(self) -> str:
        return (
            f"BlockPool(num_blocks={self._num_blocks}, used={self._num_used}, "
            f"cached={self.num_cached_blocks}, free={self.num_free_blocks}, "
            f"policy={self._policy.name!r})"
        )

    # ---- internals -----------------------------------------------------

    def _match(self, keys: Sequence[bytes]) -> list[int]:
        hits: list[int] = []
        for key in keys:
            block_id = self._key_to_block.get(key)
            if block_id is None:
                break
            hits.append(block_id)
        return hits

    def _pin(self, block_ids: Iterable[int]) -> None:
        for block_id in block_ids:
            if self._ref_count[block_id] == 0:
                self._policy.remove(block_id)
                self._num_used += 1
            self._ref_count[block_id] += 1

    def _take(self, num_blocks: int) -> list[int]:
        """Hand out ``num_blocks`` free blocks; the caller checked there are enough."""
        taken: list[int] = []
        evicted: list[tuple[int, bytes]] = []
        for _ in range(num_blocks):
            if self._unkeyed_free:
                block_id = self._unkeyed_free.popleft()
            else:
                block_id = self._policy.pop_victim()
                evicted.append((block_id, self._evict(block_id)))
            self._ref_count[block_id] = 1
            taken.append(block_id)
        self._num_used += num_blocks
        if self._on_evict is not None:
            # After the loop, so a callback sees a consistent pool.
            for block_id, key in evicted:
                self._on_evict(block_id, key)
        return taken

    def _evict(self, block_id: int) -> bytes:
        """Forget the block's key (before anyone writes to it); return that key."""
        key = self._key[block_id]
        assert key is not None, f"victim block {block_id} has no key"
        del self._key_to_block[key]
        self._key[block_id] = None
        self._parent[block_id] = None
        self._has_child[block_id] = False
        self._set_num_chains(block_id, 0)
        self._num_evictions += 1
        logger.debug("evict block %d key %s", block_id, short(key))
        return key

    def _add_chain(self, block_id: int | None) -> None:
        # Bounded by num_blocks so a cycle built from inconsistent keys cannot hang us.
        for _ in range(self._num_blocks):
            if block_id is None:
                return
            self._set_num_chains(block_id, self._num_chains[block_id] + 1)
            block_id = self._valid_parent(block_id)

    def _valid_parent(self, block_id: int) -> int | None:
        link = self._parent[block_id]
        if link is None:
            return None
        parent_id, parent_key = link
        # A parent evicted since the link was made no longer holds parent_key.
        return parent_id if self._key[parent_id] == parent_key else None

    def _set_num_chains(self, block_id: int, value: int) -> None:
        self._num_chains[block_id] = value
        self._policy.on_chain_change(block_id, value)

    def _check_block(self, block_id: int) -> None:
        if isinstance(block_id, bool) or not isinstance(block_id, int):
            raise ValueError(f"a block id is an int, got {block_id!r}")
        if not 0 <= block_id < self._num_blocks:
            raise ValueError(f"block id {block_id} out of range [0, {self._num_blocks})")

    @staticmethod
    def _check_count(num_blocks: int) -> None:
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 0:
            raise ValueError(f"a block count is an int >= 0, got {num_blocks!r}")
