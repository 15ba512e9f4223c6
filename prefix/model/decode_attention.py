"""Decode attention: one query per sequence, over its whole context in the paged cache.

A decode step reads every running sequence's K/V once; that read is the work.
Two backends compute the same thing:

  * ``"paged"`` (default): one ``index_select`` per layer copies each sequence's
    context straight into the layout attention wants, ``[S, Hkv, max_len, D]``,
    inside a buffer the cache reuses across layers and steps (a fresh multi-MB
    tensor per layer costs more in page faults than the copy itself). The
    gather indices are built once per step and shared by all layers. The query
    heads that share a KV head are folded into the query-length axis
    (``[S, Hkv, G, D]``), so SDPA reads each K/V row once for its G query heads
    instead of expanding K/V G times (``enable_gqa`` with one query per head
    was the single most expensive op of a decode step on CPU).
  * ``"gather"``: the previous path, kept selectable for the before/after bench
    and as a second implementation the tests compare against: a padded block
    gather into a fresh tensor per layer, then SDPA with ``enable_gqa``.

Padding past a sequence's own length reads block 0 (any valid block would do)
and is masked out.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from prefix.model.kv_cache import PagedKVCache

DECODE_BACKENDS = ("paged", "gather")


@dataclass
class DecodeMetadata:
    """Per-step decode indices, built once and shared by every layer."""

    seq_lens: torch.Tensor  # [S] context length of each sequence after this step
    max_len: int
    padded_tables: torch.Tensor  # [S, max_blocks] block ids, padded with block 0
    head_rows: torch.Tensor | None  # [S*Hkv*max_len] rows of the cache's [.., D] view
    _masks: dict[int | None, torch.Tensor]

    @classmethod
    def build(
        cls,
        block_tables: list[torch.Tensor],
        seq_lens: list[int],
        kv_cache: PagedKVCache,
        backend: str,
    ) -> DecodeMetadata:
        device = kv_cache.device
        max_len = max(seq_lens)
        max_blocks = max(t.numel() for t in block_tables)
        padded = torch.zeros((len(seq_lens), max_blocks), dtype=torch.long, device=device)
        for i, table in enumerate(block_tables):
            padded[i, : table.numel()] = table
        head_rows = None
        if backend == "paged":
            head_rows = kv_cache.head_rows(padded, max_len)
        lens = torch.tensor(seq_lens, dtype=torch.long, device=device)
        return cls(lens, max_len, padded, head_rows, {})

    def mask(self, window: int | None) -> torch.Tensor:
        """[S, 1, 1, max_len] bool, True = may attend (own length, and the window if any)."""
        mask = self._masks.get(window)
        if mask is None:
            k_pos = torch.arange(self.max_len, device=self.seq_lens.device)
            lens = self.seq_lens
            # [1, max_len] vs [S, 1] -> [S, max_len]
            mask = k_pos[None, :] < lens[:, None]
            if window is not None:
                mask &= (lens[:, None] - 1) - k_pos[None, :] < window
            # [S, max_len] -> [S, 1, 1, max_len]: broadcast over heads and queries
            mask = mask[:, None, None, :]
            self._masks[window] = mask
        return mask


def decode_attention(
    q: torch.Tensor,
    layer: int,
    window: int | None,
    meta: DecodeMetadata,
    kv_cache: PagedKVCache,
) -> torch.Tensor:
    """q [S, H, D] (one query per sequence) -> attention output [S, H, D]."""
    if meta.head_rows is None:
        return _gather_backend(q, layer, window, meta, kv_cache)
    num_seqs, num_heads, head_dim = q.shape
    kv_heads = kv_cache.num_kv_heads
    # each [S, Hkv, max_len, D], contiguous; valid until the next gather on this cache
    k_ctx, v_ctx = kv_cache.gather_batch(layer, meta.head_rows, num_seqs, meta.max_len)
    # [S, H, D] -> [S, Hkv, G, D]: query head h uses KV head h // G (transformers'
    # repeat_kv order), so the G heads of one group become G "queries" of that KV head
    q_grouped = q.view(num_seqs, kv_heads, num_heads // kv_heads, head_dim)
    out = F.scaled_dot_product_attention(
        q_grouped,
        k_ctx.to(q.dtype),
        v_ctx.to(q.dtype),
        attn_mask=meta.mask(window),
    )
    # [S, Hkv, G, D] -> [S, H, D]
    return out.reshape(num_seqs, num_heads, head_dim)


def _gather_backend(
    q: torch.Tensor,
    layer: int,
    window: int | None,
    meta: DecodeMetadata,
    kv_cache: PagedKVCache,
) -> torch.Tensor:
    # each [S, max_len, Hkv, D], a fresh tensor per layer
    k_ctx, v_ctx = kv_cache.gather_padded(layer, meta.padded_tables, meta.max_len)
    out = F.scaled_dot_product_attention(
        q[:, :, None, :],  # [S, H, D] -> [S, H, 1, D]: one query per sequence
        k_ctx.transpose(1, 2).to(q.dtype),  # [S, max_len, Hkv, D] -> [S, Hkv, max_len, D]
        v_ctx.transpose(1, 2).to(q.dtype),
        attn_mask=meta.mask(window),
        enable_gqa=True,
    )
    # [S, H, 1, D] -> [S, H, D]
    return out[:, :, 0, :]
