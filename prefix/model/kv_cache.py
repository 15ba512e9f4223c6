"""The paged KV cache: one preallocated tensor, addressed by physical block id.

Layout ``kv[num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim]``
(index 0 of dim 1 is K, 1 is V). A token's *slot* is
``block_id * block_size + offset``. The block pool (pure Python) decides which
physical block ids a sequence owns; this class only moves tensors, so it never
knows about keys, ref counts or eviction.

Blocks are indexed whole when reading (one gather over the block dim per layer
for K and V together) because a sequence's context is a list of whole blocks;
only the last one is partially filled and the padding is sliced or masked off.
"""

from __future__ import annotations

import torch

from prefix.errors import EngineConfigError
from prefix.model.config import ModelConfig


class PagedKVCache:
    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        num_blocks: int,
        block_size: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        for name, value in (
            ("num_layers", num_layers),
            ("num_kv_heads", num_kv_heads),
            ("head_dim", head_dim),
            ("num_blocks", num_blocks),
            ("block_size", block_size),
        ):
            if value < 1:
                raise EngineConfigError(f"{name} must be >= 1, got {value}")
        self.num_layers = num_layers
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self._num_blocks = num_blocks
        self._block_size = block_size
        self.dtype = dtype
        self.device = torch.device(device)
        # zeros, not empty: a bug that reads an unwritten slot gives a stable wrong
        # answer that tests catch, instead of garbage that sometimes looks right
        self.kv = torch.zeros(
            (num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim),
            dtype=dtype,
            device=self.device,
        )
        # grow-only scratch for gather_batch: decode reads every running sequence's
        # context each layer, and a fresh tensor each time costs page faults that
        # exceed the copy; one forward at a time per cache (the engine holds a lock)
        self._scratch = torch.empty(0, dtype=dtype, device=self.device)

    # ------------------------------------------------------------ construction

    @staticmethod
    def bytes_per_token_for(
        num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype
    ) -> int:
        elem = torch.empty((), dtype=dtype).element_size()
        return num_layers * 2 * num_kv_heads * head_dim * elem

    @classmethod
    def from_budget(
        cls,
        memory_bytes: int,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        block_size: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> PagedKVCache:
        """As many blocks as fit in ``memory_bytes`` (at least one, or EngineConfigError)."""
        if block_size < 1:
            raise EngineConfigError(f"block_size must be >= 1, got {block_size}")
        per_block = cls.bytes_per_token_for(num_layers, num_kv_heads, head_dim, dtype) * block_size
        num_blocks = memory_bytes // per_block
        if num_blocks < 1:
            raise EngineConfigError(
                f"KV budget of {memory_bytes} bytes is smaller than one block "
                f"({per_block} bytes = {block_size} tokens)"
            )
        return cls(num_layers, num_kv_heads, head_dim, num_blocks, block_size, dtype, device)

    @classmethod
    def for_model(
        cls,
        config: ModelConfig,
        block_size: int,
        num_blocks: int | None = None,
        memory_bytes: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> PagedKVCache:
        """Shape the cache for ``config``; give exactly one of num_blocks / memory_bytes."""
        if (num_blocks is None) == (memory_bytes is None):
            raise EngineConfigError("give exactly one of num_blocks or memory_bytes")
        shape = (config.num_layers, config.num_kv_heads, config.head_dim)
        if memory_bytes is not None:
            return cls.from_budget(memory_bytes, *shape, block_size, dtype, device)
        assert num_blocks is not None
        return cls(*shape, num_blocks, block_size, dtype, device)

    # -------------------------------------------------------------- properties

    @property
    def num_blocks(self) -> int:
        return self._num_blocks

    @property
    def block_size(self) -> int:
        return self._block_size

    @property
    def bytes_per_token(self) -> int:
        return self.bytes_per_token_for(
            self.num_layers, self.num_kv_heads, self.head_dim, self.dtype
        )

    @property
    def bytes_per_block(self) -> int:
        return self.bytes_per_token * self._block_size

    @property
    def total_bytes(self) -> int:
        return self.bytes_per_block * self._num_blocks

    # ------------------------------------------------------------------- write

    def write(
        self, layer: int, slot_mapping: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> None:
        """Store new tokens' K/V: ``k, v`` are [T, Hkv, D], ``slot_mapping`` is [T]."""
        # [2, num_blocks, block_size, Hkv, D] -> [2, num_blocks*block_size, Hkv, D]; a view,
        # so the index_put lands in the cache storage itself
        flat = self.kv[layer].view(2, -1, self.num_kv_heads, self.head_dim)
        flat[0, slot_mapping] = k.to(self.dtype)
        flat[1, slot_mapping] = v.to(self.dtype)

    def copy_block(self, src: int, dst: int) -> None:
        """Copy every layer's K/V of physical block ``src`` into ``dst`` (copy-on-write)."""
        self.kv[:, :, dst] = self.kv[:, :, src]

    # -------------------------------------------------------------------- read

    def slots(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of every slot of ``layer``, each [num_blocks*block_size, Hkv, D]: views."""
        # [2, num_blocks, block_size, Hkv, D] -> [2, num_blocks*block_size, Hkv, D]
        flat = self.kv[layer].view(2, -1, self.num_kv_heads, self.head_dim)
        return flat[0], flat[1]

    def gather(
        self, layer: int, block_table: torch.Tensor, length: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of tokens [0, length) of one sequence, each [length, Hkv, D]."""
        if length > block_table.numel() * self._block_size:
            raise ValueError(
                f"length {length} exceeds the {block_table.numel()} blocks of the table"
            )
        # [2, n_blocks, block_size, Hkv, D]: whole blocks in table order
        blocks = self.kv[layer][:, block_table]
        # [2, n_blocks, block_size, Hkv, D] -> [2, n_blocks*block_size, Hkv, D] -> [2, length, ...]
        kv = blocks.reshape(2, -1, self.num_kv_heads, self.head_dim)[:, :length]
        return kv[0], kv[1]

    def gather_padded(
        self, layer: int, block_tables: torch.Tensor, max_len: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of several sequences at once, each [S, max_len, Hkv, D].

        ``block_tables`` is [S, max_blocks], padded with any valid block id; positions
        past a sequence's own length hold another block's data and must be masked.
        """
        num_seqs, max_blocks = block_tables.shape
        if max_len > max_blocks * self._block_size:
            raise ValueError(f"max_len {max_len} exceeds {max_blocks} blocks per table")
        # [2, S, max_blocks, block_size, Hkv, D]
        blocks = self.kv[layer][:, block_tables]
        # -> [2, S, max_blocks*block_size, Hkv, D] -> [2, S, max_len, Hkv, D]
        kv = blocks.reshape(2, num_seqs, -1, self.num_kv_heads, self.head_dim)[:, :, :max_len]
        return kv[0], kv[1]

    def head_rows(self, padded_tables: torch.Tensor, max_len: int) -> torch.Tensor:
        """Row indices for ``gather_batch``: [S*Hkv*max_len], built once per step.

        ``padded_tables`` is [S, max_blocks]. The rows address the cache seen as
        [num_blocks*block_size*Hkv, D] (token slot major, KV head minor), ordered so
        that the gathered rows ARE [S, Hkv, max_len, D]: head-major per sequence, as
        attention reads them, with no transpose copy after the gather.
        """
        max_blocks = padded_tables.shape[1]
        if max_len > max_blocks * self._block_size:
            raise ValueError(f"max_len {max_len} exceeds {max_blocks} blocks per table")
        device = padded_tables.device
        pos = torch.arange(max_len, device=device)
        # [S, max_len]: block of each position, then its slot in the flat token axis
        slots = padded_tables[:, pos // self._block_size] * self._block_size
        slots += pos % self._block_size
        heads = torch.arange(self.num_kv_heads, device=device)
        # [S, 1, max_len] * Hkv + [1, Hkv, 1] -> [S, Hkv, max_len] -> [S*Hkv*max_len]
        return (slots[:, None, :] * self.num_kv_heads + heads[None, :, None]).reshape(-1)

    def gather_rows(self, layer: int, rows: torch.Tensor) -> torch.Tensor:
        """K and V rows of ``layer`` at ``rows`` (from ``head_rows()``): [2, R, D].

        One ``index_select`` for K and V together into the cache's reused scratch
        buffer: the result is overwritten by the next gather, so use it first.
        """
        need = 2 * rows.numel() * self.head_dim
        if self._scratch.numel() < need:
            self._scratch = torch.empty(need, dtype=self.dtype, device=self.device)
        # [2, num_blocks, block_size, Hkv, D] -> [2, num_blocks*block_size*Hkv, D]: a view
        src = self.kv[layer].view(2, -1, self.head_dim)
        # the first `need` scratch elements as [2, R, D]
        out = self._scratch[:need].view(2, rows.numel(), self.head_dim)
        torch.index_select(src, 1, rows, out=out)
        return out

    def gather_batch(
        self, layer: int, head_rows: torch.Tensor, num_seqs: int, max_len: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of several sequences, each [S, Hkv, max_len, D] and contiguous.

        ``gather_rows`` of ``head_rows(padded_tables, max_len)``, shaped; valid until
        the next gather on this cache.
        """
        rows = head_rows.numel()
        if rows != num_seqs * self.num_kv_heads * max_len:
            raise ValueError(f"{rows} rows do not make [{num_seqs}, Hkv, {max_len}, D]")
        # [2, S*Hkv*max_len, D] -> [2, S, Hkv, max_len, D]
        kv = self.gather_rows(layer, head_rows).view(
            2, num_seqs, self.num_kv_heads, max_len, self.head_dim
        )
        return kv[0], kv[1]

    def __repr__(self) -> str:
        return (
            f"PagedKVCache(layers={self.num_layers}, blocks={self._num_blocks}, "
            f"block_size={self._block_size}, kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, dtype={self.dtype}, device={self.device}, "
            f"{self.total_bytes / 2**20:.1f} MiB)"
        )
