"""Attention of one decoder layer over the paged KV cache, and its per-forward metadata.

For each layer the new tokens' K/V are written into the paged cache first, then every
sequence attends over its whole context ``[0, seq_len)`` read through its own block
table, so a suffix prefilled after a cached prefix sees the prefix K/V exactly as the
earlier request wrote them, at the positions they had. The paths:
  * decode (every query_len == 1): prefix/model/decode_attention.py;
  * short prefill chunks over cached contexts, together: prefix/model/prefill_attention.py;
  * each longer chunk alone: the native flash kernel (prefix/kernels, bf16 on
    AVX512-BF16 CPUs) straight from the paged cache, or SDPA with an explicit causal
    mask whose diagonal is shifted by the cached length (``is_causal`` when nothing is
    cached).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from prefix.kernels.flash_attention import FlashAttention
from prefix.kernels.fused_ops import FusedOps
from prefix.model.config import ModelConfig
from prefix.model.decode_attention import DecodeMetadata, decode_attention
from prefix.model.forward_batch import ForwardBatch
from prefix.model.kv_cache import PagedKVCache
from prefix.model.packed_linear import PackedLinear
from prefix.model.prefill_attention import PrefillBatchMetadata, batched_prefill_attention
from prefix.model.rope import apply_rope


@dataclass
class AttentionMetadata:
    """Per-forward attention bookkeeping, built once and shared by every layer."""

    batch: ForwardBatch
    query_starts: list[int]  # row of each sequence's first new token in the flat batch
    decode: DecodeMetadata | None  # set when every sequence has exactly one new token
    prefill_batch: PrefillBatchMetadata | None  # the short chunks attended together
    # the native flash kernel for the other prefill chunks (None: SDPA)
    flash: FlashAttention | None = None
    # the fused element-wise kernels (RoPE here; the norms and SiLU in the model loop)
    fused: FusedOps | None = None
    _masks: dict[tuple[int, int | None], torch.Tensor | None] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        batch: ForwardBatch,
        kv_cache: PagedKVCache,
        decode_backend: str = "paged",
        batch_prefill: bool = True,
        flash: FlashAttention | None = None,
        windowed: bool = False,
    ) -> AttentionMetadata:
        starts = [0]
        for q in batch.query_lens[:-1]:
            starts.append(starts[-1] + q)
        decode: DecodeMetadata | None = None
        prefill_batch: PrefillBatchMetadata | None = None
        if batch.is_decode:
            decode = DecodeMetadata.build(
                batch.block_tables,
                batch.seq_lens,
                kv_cache,
                decode_backend,
                flash,
                need_rows=flash is None or windowed,
            )
        elif batch_prefill:
            prefill_batch = PrefillBatchMetadata.build(
                starts,
                batch.query_lens,
                batch.seq_lens,
                batch.block_tables,
                kv_cache,
                flash,
                need_rows=flash is None or windowed,
            )
        return cls(batch, starts, decode, prefill_batch, flash)

    def seq_mask(self, seq: int, window: int | None) -> torch.Tensor | None:
        """[q_len, seq_len] bool, True = may attend; None means plain is_causal."""
        key = (seq, window)
        if key not in self._masks:
            q_len, seq_len = self.batch.query_lens[seq], self.batch.seq_lens[seq]
            if q_len == seq_len and window is None:
                self._masks[key] = None
            else:
                device = self.batch.input_ids.device
                q_pos = torch.arange(seq_len - q_len, seq_len, device=device)
                k_pos = torch.arange(seq_len, device=device)
                # [q_len, 1] vs [1, seq_len]: query at absolute p sees keys 0..p
                mask = k_pos[None, :] <= q_pos[:, None]
                if window is not None:
                    mask &= q_pos[:, None] - k_pos[None, :] < window
                self._masks[key] = mask
        return self._masks[key]


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.num_heads = config.num_heads
        self.num_kv_heads = config.num_kv_heads
        self.head_dim = config.head_dim
        self.window = config.sliding_window(layer)
        q_dim, kv_dim = config.num_heads * config.head_dim, config.num_kv_heads * config.head_dim
        self.q_proj: nn.Linear | None = nn.Linear(
            config.hidden_size, q_dim, bias=config.attention_bias
        )
        self.k_proj: nn.Linear | None = nn.Linear(
            config.hidden_size, kv_dim, bias=config.attention_bias
        )
        self.v_proj: nn.Linear | None = nn.Linear(
            config.hidden_size, kv_dim, bias=config.attention_bias
        )
        # nn.Linear, or a PackedLinear once the model is packed (same call)
        self.o_proj: nn.Module = nn.Linear(q_dim, config.hidden_size, bias=config.o_proj_bias)
        # set by pack(): q/k/v as one packed product; the three layers are then dropped
        self.qkv_proj: PackedLinear | None = None

    def pack(self) -> None:
        """Replace q/k/v with one packed product and o_proj with a packed one."""
        if self.qkv_proj is not None:
            return
        assert self.q_proj is not None and self.k_proj is not None and self.v_proj is not None
        assert isinstance(self.o_proj, nn.Linear)
        self.qkv_proj = PackedLinear([self.q_proj, self.k_proj, self.v_proj])
        self.o_proj = PackedLinear([self.o_proj])
        self.q_proj = self.k_proj = self.v_proj = None

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        meta: AttentionMetadata,
        kv_cache: PagedKVCache,
    ) -> torch.Tensor:
        num_tokens = x.shape[0]
        heads = self.num_heads + self.num_kv_heads
        if self.qkv_proj is not None:
            qkv = self.qkv_proj(x)  # [T, (H + 2*Hkv) * D]
            # q and k are adjacent columns: rotate them in one pass. [T, (H+Hkv)*D] ->
            # [T, H+Hkv, D] (a strided view of the product)
            qk_raw = qkv[:, : heads * self.head_dim].view(num_tokens, heads, -1)
            if meta.fused is not None:
                qk = meta.fused.rope(qk_raw, cos, sin)
            else:
                qk = apply_rope(qk_raw, cos, sin)
            # [T, Hkv*D] -> [T, Hkv, D]
            v = qkv[:, heads * self.head_dim :].view(num_tokens, self.num_kv_heads, -1)
        else:
            assert self.q_proj is not None and self.k_proj is not None and self.v_proj is not None
            # [T, H*D] + [T, Hkv*D] -> [T, H+Hkv, D]
            q_k = torch.cat((self.q_proj(x), self.k_proj(x)), dim=-1)
            qk = apply_rope(q_k.view(num_tokens, heads, self.head_dim), cos, sin)
            # [T, Hkv*D] -> [T, Hkv, D]
            v = self.v_proj(x).view(num_tokens, self.num_kv_heads, self.head_dim)
        q, k = qk[:, : self.num_heads], qk[:, self.num_heads :]
        batch = meta.batch
        # write before reading: a sequence's own new tokens are part of its context
        kv_cache.write(self.layer, batch.slot_mapping, k, v)
        if meta.decode is not None:
            out = decode_attention(q, self.layer, self.window, meta.decode, kv_cache)
        else:
            out = self._prefill(q, k, v, meta, kv_cache)
        # [T, H, D] -> [T, H*D]
        return self.o_proj(out.reshape(num_tokens, self.num_heads * self.head_dim))

    def _prefill(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        meta: AttentionMetadata,
        kv_cache: PagedKVCache,
    ) -> torch.Tensor:
        batch = meta.batch
        out = torch.empty_like(q)
        batched: set[int] = set()
        if meta.prefill_batch is not None:
            batched_prefill_attention(q, self.layer, self.window, meta.prefill_batch, kv_cache, out)
            batched.update(meta.prefill_batch.seqs)
        flash = meta.flash
        if flash is not None and not (
            FlashAttention.supports(q, self.num_kv_heads) and kv_cache.dtype == q.dtype
        ):
            flash = None
        for seq, start in enumerate(meta.query_starts):
            if seq in batched:
                continue
            q_len, seq_len = batch.query_lens[seq], batch.seq_lens[seq]
            end = start + q_len
            if flash is not None:
                if q_len == seq_len:
                    flash.attend(
                        q[start:end],
                        k[start:end],
                        v[start:end],
                        out[start:end],
                        seq_len,
                        self.window,
                    )
                else:
                    # straight from the paged cache through the block table: no gather
                    k_slots, v_slots = kv_cache.slots(self.layer)
                    flash.attend(
                        q[start:end],
                        k_slots,
                        v_slots,
                        out[start:end],
                        seq_len,
                        self.window,
                        batch.block_tables[seq],
                        kv_cache.block_size,
                    )
                continue
            if q_len == seq_len:
                # nothing cached: the context is exactly the tokens just projected
                k_ctx, v_ctx = k[start:end], v[start:end]
            else:
                # each [seq_len, Hkv, D]: cached prefix + the suffix written above
                k_ctx, v_ctx = kv_cache.gather(self.layer, batch.block_tables[seq], seq_len)
            mask = meta.seq_mask(seq, self.window)
            # q: [q_len, H, D] -> [1, H, q_len, D]; k, v: [seq_len, Hkv, D] -> [1, Hkv, seq_len, D]
            seq_out = F.scaled_dot_product_attention(
                q[start:end].transpose(0, 1)[None],
                k_ctx.transpose(0, 1)[None].to(q.dtype),
                v_ctx.transpose(0, 1)[None].to(q.dtype),
                attn_mask=mask,
                is_causal=mask is None,
                enable_gqa=True,
            )
            # [1, H, q_len, D] -> [q_len, H, D]
            out[start:end] = seq_out[0].transpose(0, 1)
        return out
