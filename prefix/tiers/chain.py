"""The levels below the GPU pool, in lookup order: L1 elsewhere → L2 host → L3 stores.

``BlockManager.admit`` hands this the chain keys past the last pool hit and the
fresh blocks allocated for them; :meth:`TierChain.load_chain` fills them in
order from the first level that has each key and stops at the first key no
level has, because a block's KV is only valid after every block before it.
Keys are the pool's chained keys, so a tenant's namespace holds in every level
exactly as in L1: a key built under one chain root never equals a key built
under another, in memory, on disk or in Redis.

Writes: the pool's ``on_evict`` hook copies a victim block to L2 before it is
reused; ``on_commit`` writes every newly computed block through to each L3
store, asynchronously (:class:`prefix.tiers.l3.L3Tier`).

Not thread-safe: the engine calls it under its own lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from prefix.tiers.host import HostTier
from prefix.tiers.l3 import READ_BATCH, L3Tier

if TYPE_CHECKING:
    import torch

    from prefix.core.block_pool import BlockPool
    from prefix.model.kv_cache import PagedKVCache

log = logging.getLogger("cachegate.prefix")

__all__ = ["TierChain"]


class TierChain:
    """Implements ``block_manager.LowerTier`` over an optional L2 and any L3 stores."""

    def __init__(
        self,
        kv_cache: PagedKVCache,
        host: HostTier | None = None,
        l3: Sequence[L3Tier] = (),
        *,
        read_budget_s: float = 0.5,
    ) -> None:
        self.kv_cache = kv_cache
        self.host = host
        self.l3 = list(l3)
        # One admission may spend at most this long fetching from L3 (over all its
        # round trips), so a store that is slow but under its per-call timeout still
        # cannot hold the engine lock for long; past it, the rest is recomputed.
        self.read_budget_s = read_budget_s
        self.num_budget_exhausted = 0
        self._step_deadline: float | None = None  # set during an engine step (one_step)
        self.pool: BlockPool | None = None  # set once the pool exists
        self._from_above: list[bytes] = []  # the admission's keys not read from L3

    @property
    def is_empty(self) -> bool:
        return self.host is None and not self.l3

    # ---- writes ------------------------------------------------------------------
    def on_evict(self, block_id: int, old_key: bytes) -> None:
        if self.host is None:
            return
        try:
            self.host.put(old_key, self.kv_cache.kv[:, :, block_id])
        except Exception:  # the hook must not raise: losing an L2 copy only costs a recompute
            log.exception("copying evicted block %d to the host tier failed", block_id)

    def on_commit(self, key: bytes, block_id: int) -> None:
        for tier in self.l3:
            try:
                tier.put_async(key, self.kv_cache.kv[:, :, block_id])
            except Exception:  # a write-through failure only costs a later recompute
                log.exception("queueing block %d for %s failed", block_id, tier.name)

    def on_hit(self, keys: Sequence[bytes]) -> None:
        """Keys an admission found in the pool or the host tier: refreshed in each L3
        store, so the hottest prefixes are the last to leave it."""
        for tier in self.l3:
            try:
                tier.touch_async(keys)
            except Exception:  # a refresh lost costs at most a later recompute
                log.exception("touching blocks in %s failed", tier.name)

    # ---- reads -------------------------------------------------------------------
    @contextmanager
    def one_step(self) -> Iterator[None]:
        """The L3 reads of the admissions of one engine step share one budget
        (``read_budget_s``). A step admits up to ``max_num_seqs`` requests under the
        engine lock, and with a budget each, a store slow but under its per-call timeout
        held every decoding stream for admissions x budget (a review: 16 admissions took
        7.7 s against a Redis answering in 0.4 s; 0.3 s direct). Past it, the step's
        remaining admissions recompute instead."""
        self._step_deadline = time.monotonic() + self.read_budget_s
        try:
            yield
        finally:
            self._step_deadline = None

    def load_chain(self, keys: Sequence[bytes], block_ids: Sequence[int]) -> int:
        """Fill ``block_ids[i]`` with the KV of ``keys[i]`` in order; how many were filled."""
        # Records fetched ahead from each L3 store: key -> record (None: the store lacks it).
        fetched: list[dict[bytes, bytes | None]] = [{} for _ in self.l3]
        deadline = time.monotonic() + self.read_budget_s
        if self._step_deadline is not None:
            deadline = min(deadline, self._step_deadline)
        i = 0
        self._from_above = []  # keys served by L1 (another block) or L2: refreshed below
        try:
            while i < len(block_ids) and self._load_one(keys, i, block_ids[i], fetched, deadline):
                i += 1
        except Exception:  # a level's bug is a miss from here on, never a dead engine
            log.exception("kv tiers: loading block %d of the chain failed", i)
        if self._from_above:
            self.on_hit(self._from_above)  # once an admission
        return i

    def _load_one(
        self,
        keys: Sequence[bytes],
        i: int,
        block_id: int,
        fetched: list[dict[bytes, bytes | None]],
        deadline: float,
    ) -> bool:
        key = keys[i]
        kv = self.kv_cache
        # L1 still holds this key in another block: an earlier block of its chain was
        # evicted, this one was not. A device-local copy beats every lower level.
        src = self.pool.lookup(key) if self.pool is not None else None
        if src is not None and src != block_id:
            kv.copy_block(src, block_id)
            self._from_above.append(key)
            return True
        if self.host is not None and self.host.load(key, kv.kv[:, :, block_id]):
            self._from_above.append(key)
            return True
        for tier, ahead in zip(self.l3, fetched, strict=True):
            if key not in ahead:
                remaining = deadline - time.monotonic()
                batch = list(keys[i : i + READ_BATCH])
                records = self._fetch(tier, batch, remaining) if remaining > 0 else None
                if records is None:
                    self.num_budget_exhausted += 1
                    tier.count_error()  # shows as prefix_tier_errors_total
                    return False  # out of read time: recompute from here
                ahead.update(zip(batch, records, strict=True))
            if self._load(tier, key, ahead.pop(key), kv.kv[:, :, block_id]):
                return True
        return False

    # Redis is an optimization, never a dependency: whatever a store does (a reply of
    # the wrong shape, a client bug, MemoryError), the block is a miss and is
    # recomputed. An exception escaping here would escape BlockManager.admit inside
    # the scheduler, outside the engine step's recovery, and end the engine.
    @staticmethod
    def _fetch(tier: L3Tier, batch: list[bytes], timeout: float) -> list[bytes | None] | None:
        """``batch``'s records, all None when the store failed; None when out of time."""
        try:
            records = tier.fetch(batch, timeout)
            if isinstance(records, list) and len(records) == len(batch):
                return records
            raise TypeError(f"{len(records)} records for {len(batch)} keys")
        except TimeoutError:
            return None
        except Exception:
            log.exception("kv tier %s: read failed, treated as a miss", tier.name)
            tier.count_error()
            return [None] * len(batch)

    @staticmethod
    def _load(tier: L3Tier, key: bytes, record: bytes | None, dst: torch.Tensor) -> bool:
        try:
            return tier.load(key, record, dst)
        except Exception:  # dst may be half written: a miss recomputes or overwrites it
            log.exception("kv tier %s: loading a block failed, treated as a miss", tier.name)
            tier.count_error()
            return False

    # ---- maintenance -------------------------------------------------------------
    def flush(self, timeout: float = 30.0) -> bool:
        """Wait for every queued L3 write (tests, shutdown), ``timeout`` for them all
        (each tier waited the whole of it in turn: N tiers, N times the timeout)."""
        deadline = time.monotonic() + timeout
        return all([tier.flush(max(0.0, deadline - time.monotonic())) for tier in self.l3])

    def close(self) -> None:
        for tier in self.l3:
            tier.close()

    def stats(self) -> dict[str, dict[str, int | float]]:
        """Per-tier statistics under their metric labels (``l2_host``, ``l3_disk``…)."""
        out: dict[str, dict[str, int | float]] = {}
        if self.host is not None:
            out["l2_host"] = self.host.stats()
        for tier in self.l3:
            out[tier.name] = tier.stats()
        return out
