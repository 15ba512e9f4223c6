"""The shared-prefix decode path ("paged") against the plain per-sequence ones.

Sequences that start with the same physical blocks (a cached prompt) have those
blocks attended once for all of them and merged with each one's own tail by
log-sum-exp; the result must equal attending over each whole context: within
1e-5 in float32, within ``BF16_ULPS`` bf16 steps of the largest logit in bf16 (the
tolerance and its reasoning are in test_bf16.py). Covered: GQA (4 query heads on 2
KV heads), ragged lengths, a sliding window that hides the whole shared prefix
from the longer sequences, and q/k/v biases.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from prefix.config import EngineConfig
from prefix.model.decode_attention import (
    DecodeMetadata,
    _attend_reference,
    shared_prefix_blocks,
)
from prefix.model.forward_batch import ForwardBatch
from prefix.model.kv_cache import PagedKVCache
from prefix.model.loader import LoadedModel
from prefix.model.sampling import SamplingParams
from prefix.serve.engine import PrefixEngine
from tests.prefix.model.test_bf16 import BLOCK, assert_bf16_close, new_cache, random_tokens
from tests.prefix.model.test_bf16 import tiny_bf16 as tiny_bf16  # the fixture, re-exported


def test_shared_prefix_blocks() -> None:
    tables = [[4, 7, 1, 9], [4, 7, 2], [4, 7, 1, 3]]
    assert shared_prefix_blocks(tables, [13, 12, 16], BLOCK) == 2
    # the block holding a sequence's newest token is never shared: 8 tokens -> 1
    assert shared_prefix_blocks(tables, [13, 8, 16], BLOCK) == 1
    assert shared_prefix_blocks([[4, 7], [5, 7]], [8, 8], BLOCK) == 0
    assert shared_prefix_blocks([[4, 7, 1]], [12], BLOCK) == 0  # alone: nothing to share


def decode_with_shared_prefix(
    model: Any, prefix_len: int, tail_lens: list[int]
) -> tuple[ForwardBatch, PagedKVCache]:
    """Sequences of ``prefix_len`` shared tokens (the same blocks) + their own tails."""
    cache = new_cache(model, num_blocks=64)
    free = torch.randperm(64, generator=torch.Generator().manual_seed(11)).tolist()
    shared_blocks = prefix_len // BLOCK
    shared, free = free[:shared_blocks], free[shared_blocks:]
    prefix = random_tokens(prefix_len, seed=1)
    model(ForwardBatch.for_prefill(prefix, 0, shared, BLOCK), cache)
    tables, lengths = [], []
    for i, tail in enumerate(tail_lens):
        length = prefix_len + tail
        own = (length + 1 + BLOCK - 1) // BLOCK - shared_blocks  # room for the new token
        tables.append(shared + free[:own])
        free = free[own:]
        suffix = random_tokens(tail, seed=20 + i)
        model(ForwardBatch.for_prefill(suffix, prefix_len, tables[-1], BLOCK), cache)
        lengths.append(length)
    tokens = random_tokens(len(tail_lens), seed=5)
    return ForwardBatch.for_decode(tokens, lengths, tables, BLOCK), cache


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("variant", ["llama", "mistral_window", "qwen2"])
def test_shared_prefix_decode_equals_whole_context(
    tiny_bf16: Any,
    variant: str,
    dtype: torch.dtype,
) -> None:
    model = copy.deepcopy(tiny_bf16(variant).model).to(dtype)
    model.tie_weights()
    # ragged tails of 1..13 tokens after 8 shared tokens; with mistral's window of 6,
    # the longer sequences cannot see any shared token (an empty shared softmax)
    batch, cache = decode_with_shared_prefix(model, 8, [1, 5, 13, 2, 9])
    meta = DecodeMetadata.build(batch.block_tables, batch.seq_lens, cache, "paged")
    assert meta.shared_len == 8  # the split is really taken
    outputs = {}
    for backend in ("paged", "sdpa", "gather"):
        model.decode_backend = backend
        outputs[backend] = model(batch, cache)  # rewrites the same slots, same values
    model.decode_backend = "paged"
    for other in ("sdpa", "gather"):
        if dtype == torch.float32:
            torch.testing.assert_close(outputs["paged"], outputs[other], atol=1e-5, rtol=0)
        else:
            assert_bf16_close(outputs["paged"], outputs[other])
    # and each sequence decoded alone (no sharing possible) gives the same row
    for i in range(batch.num_seqs):
        alone = ForwardBatch.for_decode(
            [int(batch.input_ids[i])],
            [batch.seq_lens[i] - 1],
            [batch.block_tables[i].tolist()],
            BLOCK,
        )
        row = model(alone, cache)[0]
        if dtype == torch.float32:
            torch.testing.assert_close(outputs["paged"][i], row, atol=1e-5, rtol=0)
        else:
            assert_bf16_close(outputs["paged"][i], row)


@pytest.mark.parametrize("window", [None, 3])
def test_reference_attention_matches_the_cpu_flash_kernel(window: int | None) -> None:
    # the plain-ops path (used off CPU) against the kernel the CPU path calls
    gen = torch.Generator().manual_seed(3)
    seqs, kv_heads, group, length, dim = 3, 2, 2, 10, 8
    q = torch.randn(seqs, kv_heads, group, dim, generator=gen)
    k = torch.randn(seqs, kv_heads, length, dim, generator=gen)
    v = torch.randn(seqs, kv_heads, length, dim, generator=gen)
    lens = torch.tensor([10, 4, 7])
    k_pos = torch.arange(length)
    allowed = k_pos[None, :] < lens[:, None]  # [S, L]
    if window is not None:
        allowed &= (lens[:, None] - 1) - k_pos[None, :] < window
    mask = torch.zeros(seqs, 1, 1, length).masked_fill_(~allowed[:, None, None, :], -torch.inf)
    out, lse = _attend_reference(q, k, v, mask)
    flash_out, flash_lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, attn_mask=mask
    )
    torch.testing.assert_close(out, flash_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(lse, flash_lse, atol=1e-5, rtol=0)


def test_engine_decodes_requests_over_a_cached_prompt_through_the_split(
    tiny_llama: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the engine's own batches: concurrent requests after a cached system prompt share
    # its physical blocks, so their decode steps take the split, and greedy outputs
    # equal an engine without prefix caching (no shared blocks, no split)
    shared_lens: list[int] = []
    build = DecodeMetadata.build.__func__  # type: ignore[attr-defined]

    def spy(cls: type[DecodeMetadata], *args: Any, **kwargs: Any) -> DecodeMetadata:
        meta: DecodeMetadata = build(cls, *args, **kwargs)
        shared_lens.append(meta.shared_len)
        return meta

    monkeypatch.setattr(DecodeMetadata, "build", classmethod(spy))
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    system = random_tokens(16, seed=3)
    prompts = [system + random_tokens(2 + i, seed=10 + i) for i in range(3)]
    cached = PrefixEngine(EngineConfig(block_size=BLOCK, num_blocks=64), loaded=tiny_llama)
    cached.generate([*system, 5], params, namespace="g")  # caches the system prompt
    ids = [cached.add_request(cached.request(p, params, namespace="g")) for p in prompts]
    outputs: dict[str, list[int]] = {rid: [] for rid in ids}
    finished: set[str] = set()
    while len(finished) < len(ids):
        for out in cached.step():
            if out.request_id in outputs:
                outputs[out.request_id].extend(out.new_token_ids)
                if out.finished:
                    finished.add(out.request_id)
    assert max(shared_lens) == 16  # the 4 system-prompt blocks, read once per step
    plain = PrefixEngine(
        EngineConfig(block_size=BLOCK, num_blocks=64, enable_prefix_caching=False),
        loaded=tiny_llama,
    )
    for rid, prompt in zip(ids, prompts, strict=True):
        assert outputs[rid] == plain.generate(prompt, params, namespace="g").token_ids
    cached.pool.check_integrity()
