"""Batched attention for short prefill chunks over cached contexts.

A step that admits many requests sharing a cached prefix prefills many short
suffixes (a question after a cached document, a follow-up after a cached
conversation). Attending them one sequence at a time costs a gather, a mask
and an SDPA call per sequence per layer: 15 suffixes of 20 tokens over 420
cached tokens are 450 small calls per step, whose per-call overhead (and the
GIL each Python-level call takes back) dwarfs the arithmetic. Here those
sequences are attended together: their contexts are gathered in one
``index_select`` per layer into ``[S, Hkv, max_len, D]`` (the decode path's
``head_rows`` layout), their queries padded into ``[S, H, max_q, D]``, and one
SDPA call per layer takes a mask built once per step that is causal with each
sequence's diagonal shifted by its cached length.

Only chunks of at most ``MAX_BATCHED_QUERY`` tokens are batched, so padding
every query to the longest costs little; a long chunk (a cold prompt) keeps
its own call, where ``is_causal`` over just its projected K/V is already
efficient. The result equals the per-sequence path within float rounding
(tests compare both and a full forward).

With the native kernel (``prefix/kernels/paged_attention.c``, bf16 on AVX512-BF16 CPUs)
the batched chunks are attended in one call per layer straight from the paged cache:
the prompt blocks they share are read once for all of them (as in decode), then each
one's own keys; no gather, no padding, no mask tensor. Sliding-window layers keep the
SDPA call above.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from prefix.kernels.flash_attention import FlashAttention, PagedPlan
from prefix.model.decode_attention import shared_prefix_blocks
from prefix.model.kv_cache import PagedKVCache

MAX_BATCHED_QUERY = 128  # longest chunk batched; longer ones are attended alone
MAX_BATCHED_CONTEXT_TOKENS = 1 << 16  # bound on S * max_len gathered per layer


@dataclass
class PrefillBatchMetadata:
    """The batched sequences' indices, built once per forward and shared by every layer."""

    seqs: list[int]  # positions of the batched sequences in the forward's batch
    query_index: torch.Tensor  # [S*max_q] flat row of each padded query slot (pads: row 0)
    output_index: torch.Tensor  # [sum q_len] padded slot of each batched flat row
    flat_rows: torch.Tensor  # [sum q_len] the batched sequences' rows in the flat [T]
    rows: torch.Tensor | None  # [S*Hkv*max_len] cache rows (PagedKVCache.head_rows)
    query_lens: torch.Tensor  # [S]
    seq_lens: torch.Tensor  # [S]
    max_q: int
    max_len: int
    # the native kernel and its checked plan, when it runs; rows is then None unless a
    # sliding-window layer needs the SDPA path too
    flash: FlashAttention | None = None
    plan: PagedPlan | None = None
    _masks: dict[int | None, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        query_starts: list[int],
        query_lens: list[int],
        seq_lens: list[int],
        block_tables: list[torch.Tensor],
        kv_cache: PagedKVCache,
        flash: FlashAttention | None = None,
        need_rows: bool = True,
    ) -> PrefillBatchMetadata | None:
        """None when fewer than two chunks qualify (nothing to batch).

        ``flash``: the native kernel, used where it can; ``need_rows``: also build the
        SDPA path's gather indices (False only when no layer has a sliding window)."""
        seqs = [i for i, q in enumerate(query_lens) if q <= MAX_BATCHED_QUERY]
        if len(seqs) < 2:
            return None
        if kv_cache.device.type != "cpu" or kv_cache.dtype != torch.bfloat16:
            flash = None
        need_rows = need_rows or flash is None
        max_len = max(seq_lens[i] for i in seqs)
        if need_rows and len(seqs) * max_len > MAX_BATCHED_CONTEXT_TOKENS:
            return None
        max_q = max(query_lens[i] for i in seqs)
        device = kv_cache.device
        query_index = torch.zeros(len(seqs) * max_q, dtype=torch.long)
        output_index: list[int] = []
        flat_rows: list[int] = []
        for s, i in enumerate(seqs):
            rows = range(query_starts[i], query_starts[i] + query_lens[i])
            query_index[s * max_q : s * max_q + query_lens[i]] = torch.tensor(rows)
            output_index.extend(range(s * max_q, s * max_q + query_lens[i]))
            flat_rows.extend(rows)
        max_blocks = max(block_tables[i].numel() for i in seqs)
        padded = torch.zeros((len(seqs), max_blocks), dtype=torch.long, device=device)
        for s, i in enumerate(seqs):
            padded[s, : block_tables[i].numel()] = block_tables[i]

        def as_long(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.long, device=device)

        plan = None
        if flash is not None:
            tables = [block_tables[i].tolist() for i in seqs]
            lens = [seq_lens[i] for i in seqs]
            news = [query_lens[i] for i in seqs]
            shared = shared_prefix_blocks(tables, lens, kv_cache.block_size, news)
            plan = flash.plan_paged(
                [query_starts[i] for i in seqs],
                news,
                lens,
                padded,
                shared * kv_cache.block_size,
                kv_cache.block_size,
                kv_cache.num_blocks,
                sum(query_lens),
            )
        return cls(
            seqs=seqs,
            query_index=query_index.to(device),
            output_index=as_long(output_index),
            flat_rows=as_long(flat_rows),
            rows=kv_cache.head_rows(padded, max_len) if need_rows else None,
            query_lens=as_long([query_lens[i] for i in seqs]),
            seq_lens=as_long([seq_lens[i] for i in seqs]),
            max_q=max_q,
            max_len=max_len,
            flash=flash if plan is not None else None,
            plan=plan,
        )

    def mask(self, window: int | None) -> torch.Tensor:
        """[S, 1, max_q, max_len] bool, True = may attend.

        Query ``i`` of a sequence sits at absolute position ``seq_len - q_len + i`` and
        sees keys up to it (and within the window). A padding query sees key 0 only, so
        its softmax is never empty (no NaN); its output is discarded.
        """
        if window not in self._masks:
            device = self.seq_lens.device
            i = torch.arange(self.max_q, device=device)
            k = torch.arange(self.max_len, device=device)
            # [S, max_q]: absolute position of each (padded) query
            q_pos = (self.seq_lens - self.query_lens)[:, None] + i[None, :]
            # [S, max_q, 1] vs [1, 1, max_len] -> [S, max_q, max_len]
            mask = k[None, None, :] <= q_pos[:, :, None]
            if window is not None:
                mask &= q_pos[:, :, None] - k[None, None, :] < window
            is_pad = i[None, :] >= self.query_lens[:, None]  # [S, max_q]
            mask[is_pad] = k == 0
            # [S, max_q, max_len] -> [S, 1, max_q, max_len]: broadcast over heads
            self._masks[window] = mask[:, None]
        return self._masks[window]


def batched_prefill_attention(
    q: torch.Tensor,
    layer: int,
    window: int | None,
    meta: PrefillBatchMetadata,
    kv_cache: PagedKVCache,
    out: torch.Tensor,
) -> None:
    """Attend the batched sequences' queries of ``q`` [T, H, D]; write their rows of ``out``."""
    num_seqs, num_heads, head_dim = len(meta.seqs), q.shape[1], q.shape[2]
    kv_heads = kv_cache.num_kv_heads
    if (
        meta.flash is not None
        and meta.plan is not None
        and window is None
        and FlashAttention.supports_paged(q.dtype, num_heads, kv_heads, head_dim)
    ):
        k_slots, v_slots = kv_cache.slots(layer)
        meta.flash.attend_paged(q, k_slots, v_slots, meta.plan, out)
        return
    if meta.rows is None:
        raise ValueError("prefill metadata was built without gather rows for a fallback layer")
    # [2, S*Hkv*max_len, D] -> [2, S, Hkv, max_len, D]; valid until the next gather
    kv = kv_cache.gather_rows(layer, meta.rows).to(q.dtype)
    kv = kv.view(2, num_seqs, kv_heads, meta.max_len, head_dim)
    # [S*max_q, H, D] -> [S, max_q, H, D] -> [S, H, max_q, D]
    q_pad = q.index_select(0, meta.query_index).view(num_seqs, meta.max_q, num_heads, head_dim)
    attended = F.scaled_dot_product_attention(
        q_pad.transpose(1, 2), kv[0], kv[1], attn_mask=meta.mask(window), enable_gqa=True
    )
    # [S, H, max_q, D] -> [S, max_q, H, D] -> [S*max_q, H, D]
    flat = attended.transpose(1, 2).reshape(num_seqs * meta.max_q, num_heads, head_dim)
    out.index_copy_(0, meta.flat_rows, flat.index_select(0, meta.output_index))
