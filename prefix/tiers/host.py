"""L2 host tier: a bounded LRU of KV blocks in host memory, keyed by chained block keys.

Blocks evicted from the GPU pool (L1) are copied here instead of being
discarded; an admission that misses in L1 continues here along the same chain
(see :mod:`prefix.tiers.chain`). Keys are the same chained keys as L1, so tenant
namespaces hold automatically: a key built under one chain root can never equal
a key built under another.

Each entry is one block of every layer, ``[L, 2, B, Hkv, D]``, in pinned memory
when CUDA is available (so copies to and from the GPU run at full bandwidth).
When the tier is full the least recently used entry is dropped and its buffer
reused for the new block. Copies are synchronous: a buffer handed back to the
LRU may be overwritten by the next ``put`` at once.

Not thread-safe: the engine calls it under its own lock.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

import torch

log = logging.getLogger("cachegate.prefix")

__all__ = ["HostTier"]

#: The largest host allocation the tier makes at once (a power of two; see _buffer).
SLAB_BYTES = 64 << 20


class HostTier:
    def __init__(
        self,
        capacity_bytes: int,
        block_shape: tuple[int, ...],
        dtype: torch.dtype,
        *,
        pin_memory: bool | None = None,
    ) -> None:
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int):
            raise ValueError(f"capacity_bytes must be an int, got {capacity_bytes!r}")
        self.block_shape = tuple(block_shape)
        self.dtype = dtype
        numel = 1
        for dim in self.block_shape:
            numel *= dim
        self.bytes_per_block = numel * torch.empty((), dtype=dtype).element_size()
        if capacity_bytes < self.bytes_per_block:
            raise ValueError(
                f"host tier capacity {capacity_bytes} bytes is smaller than one block "
                f"({self.bytes_per_block} bytes)"
            )
        self.capacity_bytes = capacity_bytes
        self.capacity_blocks = capacity_bytes // self.bytes_per_block
        self.pin_memory = torch.cuda.is_available() if pin_memory is None else pin_memory
        self._entries: OrderedDict[bytes, torch.Tensor] = OrderedDict()  # LRU first
        # Buffers come from slabs of up to SLAB_BYTES (see _buffer), never one pinned
        # allocation per block.
        self.blocks_per_slab = max(1, min(self.capacity_blocks, SLAB_BYTES // self.bytes_per_block))
        self._spare: list[torch.Tensor] = []  # block views of a slab, not holding a block
        self.num_allocated_blocks = 0
        self.hits = 0
        self.misses = 0
        self.bytes_in = 0  # copied into the tier
        self.bytes_out = 0  # copied out of the tier
        self.seconds = 0.0  # spent copying in and out
        self.num_evictions = 0

    # ---- store -------------------------------------------------------------
    def put(self, key: bytes, src: torch.Tensor) -> None:
        """Copy ``src`` (one block, any device) into the tier under ``key`` as the MRU entry."""
        if tuple(src.shape) != self.block_shape:
            raise ValueError(f"block shape {tuple(src.shape)} != tier shape {self.block_shape}")
        start = time.perf_counter()
        buf = self._entries.pop(key, None)
        if buf is None:
            if len(self._entries) >= self.capacity_blocks:
                _, buf = self._entries.popitem(last=False)  # drop the LRU, reuse its buffer
                self.num_evictions += 1
            else:
                buf = self._buffer()
        buf.copy_(src)  # synchronous: the caller may overwrite src right after
        self._entries[key] = buf
        self.bytes_in += self.bytes_per_block
        self.seconds += time.perf_counter() - start

    def _buffer(self) -> torch.Tensor:
        """A block buffer: a spare view of a slab, else a new slab's. PyTorch's pinned
        host allocator rounds every allocation up to a power of two, so a block pinned
        on its own took up to 2x its size (a SmolLM2 block 1.42x) and the tier could pin
        twice its budget unseen. A slab of at most SLAB_BYTES (a power of two) wastes
        less than one block; all of them together at most the budget + one slab."""
        if not self._spare:
            n = min(self.blocks_per_slab, self.capacity_blocks - self.num_allocated_blocks)
            slab = torch.empty(
                (n, *self.block_shape), dtype=self.dtype, device="cpu", pin_memory=self.pin_memory
            )  # [n, L, 2, B, Hkv, D]
            self._spare = list(slab.unbind(0))  # views: the slab lives while one is held
            self.num_allocated_blocks += n
        return self._spare.pop()

    # ---- read --------------------------------------------------------------
    def get(self, key: bytes) -> torch.Tensor | None:
        """The tier's own buffer for ``key`` (moved to MRU), or None. Do not write to it."""
        buf = self._entries.get(key)
        if buf is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return buf

    def load(self, key: bytes, dst: torch.Tensor) -> bool:
        """Copy the block under ``key`` into ``dst`` (e.g. a GPU block view); False on a miss."""
        start = time.perf_counter()
        buf = self.get(key)
        if buf is None:
            return False
        dst.copy_(buf)  # synchronous, so the buffer may be reused by the next put
        self.bytes_out += self.bytes_per_block
        self.seconds += time.perf_counter() - start
        return True

    def discard(self, key: bytes) -> bool:
        """Drop ``key`` if present (e.g. invalidation); whether it was there."""
        buf = self._entries.pop(key, None)
        if buf is None:
            return False
        self._spare.append(buf)  # its slab stays allocated: the next put reuses it
        return True

    def __contains__(self, key: object) -> bool:
        """Membership only: no LRU move, no counters."""
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[bytes]:
        """Keys from least to most recently used."""
        return list(self._entries)

    # ---- metrics -----------------------------------------------------------
    def stats(self) -> dict[str, int | float]:
        lookups = self.hits + self.misses
        return {
            "capacity_bytes": self.capacity_bytes,
            "capacity_blocks": self.capacity_blocks,
            "num_blocks": len(self._entries),
            "used_bytes": len(self._entries) * self.bytes_per_block,
            "allocated_bytes": self.num_allocated_blocks * self.bytes_per_block,
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": self.hits / lookups if lookups else 0.0,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "seconds": self.seconds,
            "num_evictions": self.num_evictions,
        }

    def __repr__(self) -> str:
        return (
            f"HostTier(blocks={len(self._entries)}/{self.capacity_blocks}, "
            f"hits={self.hits}, misses={self.misses}, pinned={self.pin_memory})"
        )
