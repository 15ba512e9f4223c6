"""Sequence-level block bookkeeping on top of the ``BlockPool`` (torch-free).

The engine, the scheduler and the lab all admit, grow and release sequences
through this one class, so the rules of seed 000 live in one place:
match → check enough reclaimable blocks → pin + allocate (one step), commit a
block's key once it is fully computed, release tail-first.
"""

from __future__ import annotations

from typing import Protocol

from prefix.core.block_pool import BlockPool
from prefix.core.sequence import Sequence, SequenceStatus


class LowerTier(Protocol):
    """The cache levels below the pool (host memory, disk, Redis), under the same chained keys."""

    def load_chain(self, keys: list[bytes], block_ids: list[int]) -> int:
        """Fill ``block_ids[i]`` with the KV stored under ``keys[i]``, in order, stopping
        at the first key no level has; returns how many blocks were filled."""
        ...

    def on_commit(self, key: bytes, block_id: int) -> None:
        """A block was just computed and committed under ``key`` (write-through)."""
        ...

    def on_hit(self, keys: list[bytes]) -> None:
        """Blocks an admission reused from the pool (the lower levels' copies are in use)."""
        ...


class BlockManager:
    def __init__(
        self,
        pool: BlockPool,
        block_size: int,
        enable_prefix_caching: bool = True,
        lower_tier: LowerTier | None = None,
    ):
        self.pool = pool
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.lower_tier = lower_tier

    def admit(self, seq: Sequence) -> bool:
        """Pin the longest cached prefix and allocate blocks for the rest of the tokens.

        All-or-nothing: returns False and changes nothing when blocks are short. A
        preempted sequence comes back through here over prompt + output tokens.

        With a ``lower_tier``, the chain continues past the last pool hit: each next
        reusable key the lower tier has fills the matching newly allocated block, which
        is committed under its key and counts as cached. It stops at the first key
        missing from both levels. The copies happen only after the allocation succeeded.
        """
        seq.extend_keys()
        reusable = self._reusable_keys(seq)
        num_hits = len(self._probe_hits(seq))
        num_new = seq.num_blocks_for(seq.num_tokens) - num_hits
        allocation = self.pool.allocate_for_prefix(reusable, num_new)
        if allocation is None:
            return False
        # The pool matched under the same state we probed, so the hit counts agree.
        assert len(allocation.hit_block_ids) == num_hits
        seq.block_table = list(allocation.block_table)
        try:
            if self.lower_tier is not None and num_hits:
                self.lower_tier.on_hit(reusable[:num_hits])
            num_hits += self._load_from_lower_tier(seq, reusable, num_hits)
        except BaseException:  # all-or-nothing holds when a lower tier raises too
            self.release(seq)
            raise
        if seq.num_preemptions == 0:  # usage reports the reuse of the first admission
            seq.num_cached_tokens = num_hits * self.block_size
        seq.num_computed_tokens = num_hits * self.block_size
        seq.num_committed_blocks = num_hits
        seq.status = SequenceStatus.RUNNING
        return True

    def commit_full_blocks(self, seq: Sequence) -> None:
        """Give every fully computed block its chained key so later requests can hit it."""
        if not self.enable_prefix_caching or not seq.cache_kv:
            return
        seq.extend_keys()
        num_full = min(seq.num_computed_tokens // self.block_size, len(seq.block_keys))
        for i in range(seq.num_committed_blocks, num_full):
            parent = seq.block_table[i - 1] if i > 0 else None
            self.pool.commit(seq.block_table[i], seq.block_keys[i], parent)
            if self.lower_tier is not None:
                self.lower_tier.on_commit(seq.block_keys[i], seq.block_table[i])
        seq.num_committed_blocks = max(seq.num_committed_blocks, num_full)

    def num_blocks_to_grow(self, seq: Sequence, num_tokens: int) -> int:
        """Blocks the sequence still needs before it can hold ``num_tokens`` tokens."""
        return max(0, seq.num_blocks_for(num_tokens) - len(seq.block_table))

    def grow(self, seq: Sequence, num_tokens: int) -> bool:
        """Allocate blocks so ``num_tokens`` fit; False (nothing changed) when short."""
        needed = self.num_blocks_to_grow(seq, num_tokens)
        if needed == 0:
            return True
        if not self.pool.can_allocate(needed):
            return False
        seq.block_table.extend(self.pool.allocate(needed))
        return True

    def ensure_decode_block(self, seq: Sequence) -> None:
        """The token about to be decoded sits at position num_tokens - 1; give it a block.

        Raises NoFreeBlocksError (nothing changed) when no block is reclaimable.
        """
        if self.num_blocks_to_grow(seq, seq.num_tokens):
            seq.block_table.extend(self.pool.allocate(1))

    def release(self, seq: Sequence) -> None:
        """Drop the sequence's references tail-first; its keyed blocks stay cached."""
        if seq.block_table:
            self.pool.release(seq.block_table)
        seq.block_table = []
        seq.num_computed_tokens = 0
        seq.num_committed_blocks = 0

    def _load_from_lower_tier(self, seq: Sequence, reusable: list[bytes], start: int) -> int:
        """Fill and commit blocks ``start..`` of the chain from the lower tier; how many."""
        if self.lower_tier is None or start >= len(reusable):
            return 0
        num_loaded = self.lower_tier.load_chain(
            reusable[start:], seq.block_table[start : len(reusable)]
        )
        for i in range(start, start + num_loaded):
            parent = seq.block_table[i - 1] if i > 0 else None
            self.pool.commit(seq.block_table[i], reusable[i], parent)
        return num_loaded

    def _reusable_keys(self, seq: Sequence) -> list[bytes]:
        if not self.enable_prefix_caching or not seq.cache_kv:
            return []
        return seq.block_keys[: seq.max_reusable_blocks()]

    def _probe_hits(self, seq: Sequence) -> list[int]:
        """Cached run from the start, read without touching counters or LRU order."""
        seq.extend_keys()
        hits: list[int] = []
        for key in self._reusable_keys(seq):
            block_id = self.pool.lookup(key)
            if block_id is None:
                break
            hits.append(block_id)
        return hits
