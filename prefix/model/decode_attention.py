"""Decode attention: one query per sequence, over its whole context in the paged cache.

A decode step reads every running sequence's K/V once; that read is the work.
Three backends compute the same thing:

  * ``"paged"`` (default): like ``"sdpa"``, but calling SDPA's CPU flash kernel
    directly with an additive mask built once per step (SDPA converts the bool
    mask on every call, every layer), plus a shared-prefix split. When the
    sequences of a step start with the same physical blocks (a cached system
    prompt; the cache shares blocks by content), those blocks are gathered ONCE
    per layer and attended by every sequence's queries in one GEMM
    (``[Hkv, S*G, D] @ [Hkv, D, Lp]``, in float32), instead of being copied S
    times and read S times. Each sequence's own tail goes through the flash
    kernel, which also returns the log-sum-exp, and the two partial softmaxes are
    merged exactly by their log-sum-exps. Off CPU the tail uses plain float32
    ops when a prefix is shared and the device's SDPA when nothing is.
  * ``"sdpa"``: one ``index_select`` per layer copies each sequence's context
    straight into the layout attention wants, ``[S, Hkv, max_len, D]``, inside a
    buffer the cache reuses across layers and steps (a fresh multi-MB tensor per
    layer costs more in page faults than the copy itself). The gather indices are
    built once per step and shared by all layers. The query heads that share a KV
    head are folded into the query-length axis (``[S, Hkv, G, D]``), so SDPA reads
    each K/V row once for its G query heads instead of expanding K/V G times.
  * ``"gather"``: the first path, kept as a second implementation the tests
    compare against: a padded block gather into a fresh tensor per layer, then
    SDPA with ``enable_gqa``.

With the native kernel (``prefix/kernels``, bf16 on AVX512-BF16 CPUs) the ``"paged"``
backend hands each layer to ``paged_attention.c`` instead: the same shared-prefix
split, but read straight from the cache through the block tables (no gather, no
padding, one online softmax per row instead of two merged ones). Layers with a sliding
window keep the path above.

Padding past a sequence's own length reads block 0 (any valid block would do)
and is masked out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from prefix.kernels.flash_attention import FlashAttention, PagedPlan
from prefix.model.kv_cache import PagedKVCache

DECODE_BACKENDS = ("paged", "sdpa", "gather")


def shared_prefix_blocks(
    tables: list[list[int]],
    seq_lens: list[int],
    block_size: int,
    query_lens: list[int] | None = None,
) -> int:
    """Leading blocks that every sequence holds at the same physical ids.

    Only blocks before each sequence's first new token (its last one in decode) count,
    so every query sees the whole shared part and every sequence keeps its new tokens
    in its own tail (whose softmax is then never empty).
    """
    if len(tables) < 2:
        return 0
    news = query_lens or [1] * len(seq_lens)
    limit = min(n - q for n, q in zip(seq_lens, news, strict=True)) // block_size
    first = tables[0]
    shared = 0
    while shared < limit and all(t[shared] == first[shared] for t in tables):
        shared += 1
    return shared


@dataclass
class DecodeMetadata:
    """Per-step decode indices, built once and shared by every layer."""

    seq_lens: torch.Tensor  # [S] context length of each sequence after this step
    max_len: int
    padded_tables: torch.Tensor  # [S, max_blocks] block ids, padded with block 0
    # rows of the cache's [.., D] view: [Hkv*shared_len] then [S*Hkv*tail_len]
    rows: torch.Tensor | None
    backend: str
    shared_len: int = 0  # leading tokens read once for all sequences ("paged")
    # the native kernel and its checked tables ("paged" with the kernel), else None
    flash: FlashAttention | None = None
    plan: PagedPlan | None = None
    _masks: dict[tuple[str, int | None, torch.dtype], torch.Tensor | None] = field(
        default_factory=dict
    )

    @property
    def tail_len(self) -> int:
        return self.max_len - self.shared_len

    @classmethod
    def build(
        cls,
        block_tables: list[torch.Tensor],
        seq_lens: list[int],
        kv_cache: PagedKVCache,
        backend: str,
        flash: FlashAttention | None = None,
        need_rows: bool = True,
    ) -> DecodeMetadata:
        """``flash``: the native kernel to use where it can; ``need_rows``: also build
        the gather indices of the path above (False only when no layer will fall back
        to it, i.e. the model has no sliding window)."""
        device = kv_cache.device
        max_len = max(seq_lens)
        max_blocks = max(t.numel() for t in block_tables)
        padded = torch.zeros((len(seq_lens), max_blocks), dtype=torch.long, device=device)
        for i, table in enumerate(block_tables):
            padded[i, : table.numel()] = table
        lens = torch.tensor(seq_lens, dtype=torch.long, device=device)
        if backend == "gather":
            return cls(lens, max_len, padded, None, backend)
        shared = 0
        if backend == "paged":
            tables = [t.tolist() for t in block_tables]
            shared = shared_prefix_blocks(tables, seq_lens, kv_cache.block_size)
        shared_len = shared * kv_cache.block_size
        plan = None
        if (
            flash is not None
            and backend == "paged"
            and device.type == "cpu"
            and kv_cache.dtype == torch.bfloat16
        ):
            num_seqs = len(seq_lens)
            plan = flash.plan_paged(
                list(range(num_seqs)),
                [1] * num_seqs,
                seq_lens,
                padded,
                shared_len,
                kv_cache.block_size,
                kv_cache.num_blocks,
                num_seqs,
            )
        else:
            flash = None
        if plan is not None and not need_rows:
            return cls(lens, max_len, padded, None, backend, shared_len, flash, plan)
        rows = kv_cache.head_rows(padded[:, shared:], max_len - shared_len)
        if shared:
            # the shared blocks once, as one sequence's rows: [Hkv*shared_len]
            rows = torch.cat((kv_cache.head_rows(padded[:1, :shared], shared_len), rows))
        return cls(lens, max_len, padded, rows, backend, shared_len, flash, plan)

    def mask(self, window: int | None) -> torch.Tensor:
        """[S, 1, 1, tail_len] bool, True = may attend (own length, and the window if any)."""
        mask = self._masks.get(("bool", window, torch.bool))
        if mask is None:
            device = self.seq_lens.device
            k_pos = torch.arange(self.shared_len, self.max_len, device=device)
            lens = self.seq_lens
            # [1, tail_len] vs [S, 1] -> [S, tail_len]
            mask = k_pos[None, :] < lens[:, None]
            if window is not None:
                mask &= (lens[:, None] - 1) - k_pos[None, :] < window
            # [S, tail_len] -> [S, 1, 1, tail_len]: broadcast over heads and queries
            mask = mask[:, None, None, :]
            self._masks[("bool", window, torch.bool)] = mask
        return mask

    def additive_mask(self, window: int | None, dtype: torch.dtype) -> torch.Tensor:
        """``mask`` as 0 / -inf in ``dtype``, the form the flash kernel takes."""
        key = ("add", window, dtype)
        mask = self._masks.get(key)
        if mask is None:
            allowed = self.mask(window)
            mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
            mask.masked_fill_(~allowed, float("-inf"))
            self._masks[key] = mask
        return mask

    def shared_mask(self, window: int | None) -> torch.Tensor | None:
        """[S, shared_len] bool for the shared part, None when every key is visible."""
        if window is None:
            return None
        key = ("shared", window, torch.bool)
        if key not in self._masks:
            k_pos = torch.arange(self.shared_len, device=self.seq_lens.device)
            # [S, 1] vs [1, shared_len] -> [S, shared_len]
            self._masks[key] = (self.seq_lens[:, None] - 1) - k_pos[None, :] < window
        return self._masks[key]


def decode_attention(
    q: torch.Tensor,
    layer: int,
    window: int | None,
    meta: DecodeMetadata,
    kv_cache: PagedKVCache,
) -> torch.Tensor:
    """q [S, H, D] (one query per sequence) -> attention output [S, H, D]."""
    if (
        meta.flash is not None
        and meta.plan is not None
        and window is None
        and FlashAttention.supports_paged(q.dtype, q.shape[1], kv_cache.num_kv_heads, q.shape[2])
    ):
        out = torch.empty_like(q)
        k_slots, v_slots = kv_cache.slots(layer)
        meta.flash.attend_paged(q, k_slots, v_slots, meta.plan, out)
        return out
    if meta.rows is None and meta.backend != "gather":
        raise ValueError("decode metadata was built without gather rows for a fallback layer")
    if meta.rows is None:
        return _gather_backend(q, layer, window, meta, kv_cache)
    num_seqs, num_heads, head_dim = q.shape
    kv_heads = kv_cache.num_kv_heads
    # [2, R, D]; valid until the next gather on this cache (.to: a no-op when the
    # cache holds the model's dtype, as the engine's does)
    kv = kv_cache.gather_rows(layer, meta.rows).to(q.dtype)
    shared_rows = kv_heads * meta.shared_len
    # [2, S*Hkv*tail_len, D] -> [2, S, Hkv, tail_len, D]
    tail = kv[:, shared_rows:].view(2, num_seqs, kv_heads, meta.tail_len, head_dim)
    # [S, H, D] -> [S, Hkv, G, D]: query head h uses KV head h // G (transformers'
    # repeat_kv order), so the G heads of one group become G "queries" of that KV head
    q_grouped = q.view(num_seqs, kv_heads, num_heads // kv_heads, head_dim)
    if meta.backend == "sdpa" or (meta.shared_len == 0 and q.device.type != "cpu"):
        # off CPU with nothing shared, the device's own SDPA kernel is the fast path
        out = F.scaled_dot_product_attention(
            q_grouped, tail[0], tail[1], attn_mask=meta.mask(window)
        )
        # [S, Hkv, G, D] -> [S, H, D]
        return out.reshape(num_seqs, num_heads, head_dim)
    out_tail, lse_tail = _attend_with_lse(q_grouped, tail[0], tail[1], meta, window)
    if meta.shared_len == 0:
        # [S, Hkv, G, D] -> [S, H, D]
        return out_tail.to(q.dtype).reshape(num_seqs, num_heads, head_dim)
    # [2, Hkv*shared_len, D] -> [2, Hkv, shared_len, D]
    shared = kv[:, :shared_rows].view(2, kv_heads, meta.shared_len, head_dim)
    out_shared, lse_shared = _shared_attention(
        q_grouped, shared[0], shared[1], meta.shared_mask(window)
    )
    # two softmaxes over disjoint keys: weigh each by its share of the total mass
    lse = torch.logaddexp(lse_tail, lse_shared)  # [S, Hkv, G]
    out = out_tail.float() * (lse_tail - lse).exp()[..., None]
    out += out_shared * (lse_shared - lse).exp()[..., None]
    # [S, Hkv, G, D] -> [S, H, D]
    return out.to(q.dtype).reshape(num_seqs, num_heads, head_dim)


def _attend_with_lse(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    meta: DecodeMetadata,
    window: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q [S, Hkv, G, D] over k, v [S, Hkv, L, D] -> (out [S, Hkv, G, D], lse [S, Hkv, G])."""
    if q.device.type == "cpu":
        # the kernel F.scaled_dot_product_attention runs on CPU, called directly
        # because it also returns the float32 log-sum-exp the merge needs
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, attn_mask=meta.additive_mask(window, q.dtype)
        )
        return out, lse
    return _attend_reference(q, k, v, meta.additive_mask(window, torch.float32))


def _attend_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same in plain float32 ops (off CPU); ``mask`` [S, 1, 1, L] is 0 / -inf."""
    # [S, Hkv, G, D] @ [S, Hkv, D, L] -> [S, Hkv, G, L]
    scores = q.float() @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
    scores += mask
    lse = torch.logsumexp(scores, dim=-1)  # [S, Hkv, G]
    return (scores - lse[..., None]).exp() @ v.float(), lse


def _shared_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every sequence's queries over one shared context, in float32.

    q [S, Hkv, G, D], k, v [Hkv, Lp, D] -> (out [S, Hkv, G, D], lse [S, Hkv, G]).
    The shared keys are read once for all S*G queries of a KV head (a real GEMM);
    float32 because it is one small block, and so it rounds no more than SDPA does.
    """
    num_seqs, kv_heads, group, head_dim = q.shape
    # [S, Hkv, G, D] -> [Hkv, S, G, D] -> [Hkv, S*G, D]; the 1/sqrt(D) scale goes on
    # the S*G query rows rather than on the S*G*Lp scores
    q_rows = q.transpose(0, 1).reshape(kv_heads, num_seqs * group, head_dim).float()
    q_rows.mul_(1 / math.sqrt(head_dim))
    # [Hkv, S*G, D] @ [Hkv, D, Lp] -> [Hkv, S*G, Lp]
    scores = torch.bmm(q_rows, k.float().transpose(1, 2))
    if mask is not None:
        # [Hkv, S*G, Lp] -> [Hkv, S, G, Lp]; mask [S, Lp] -> [1, S, 1, Lp]
        scores.view(kv_heads, num_seqs, group, -1).masked_fill_(
            ~mask[None, :, None, :], float("-inf")
        )
    # softmax with its log-sum-exp, one exp pass in place: lse = max + log(sum(exp(s - max)))
    peak = scores.amax(dim=-1, keepdim=True)  # [Hkv, S*G, 1]; -inf where a window hides all
    # a finite stand-in for a -inf peak keeps exp() at 0 instead of NaN for those rows
    peak.clamp_(min=-1e30)
    probs = scores.sub_(peak).exp_()
    total = probs.sum(dim=-1, keepdim=True)  # [Hkv, S*G, 1]; 0 where all are hidden
    lse = (peak + total.log()).squeeze(-1)  # [Hkv, S*G]; -inf where a window hides it all
    out = torch.bmm(probs, v.float()).div_(total.clamp(min=1e-30))  # [Hkv, S*G, D]
    # [Hkv, S*G, D] -> [Hkv, S, G, D] -> [S, Hkv, G, D]; [Hkv, S*G] -> [S, Hkv, G]
    out = out.view(kv_heads, num_seqs, group, head_dim).transpose(0, 1)
    return out, lse.view(kv_heads, num_seqs, group).transpose(0, 1)


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
