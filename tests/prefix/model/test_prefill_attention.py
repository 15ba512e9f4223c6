"""Batched prefill attention (short chunks over cached contexts) against the per-sequence path.

One forward holds several sequences, each prefilling a chunk after its own cached
prefix (ragged cached lengths, ragged chunk lengths, one uncached prompt, one chunk
too long to batch). Its logits must equal the per-sequence path (``batch_prefill``
off) and each sequence's own full forward: within 1e-5 in float32, within
``BF16_ULPS`` bf16 steps in bfloat16 (tolerance reasoning in test_bf16.py). Covered:
GQA, a sliding window (mistral), q/k/v biases (qwen2).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from prefix.model import prefill_attention
from prefix.model.forward_batch import ForwardBatch, SeqChunk
from prefix.model.llama import AttentionMetadata
from tests.prefix.model.test_bf16 import BLOCK, assert_bf16_close, new_cache, random_tokens
from tests.prefix.model.test_bf16 import tiny_bf16 as tiny_bf16  # the fixture, re-exported

# (cached tokens, new tokens) per sequence: ragged both ways; (0, 7) is an uncached
# prompt; the last chunk is longer than MAX_BATCHED_QUERY (patched to 8 below)
SHAPES = [(8, 3), (13, 1), (4, 6), (0, 7), (21, 5), (6, 10)]


def _mixed_batch(model: Any) -> tuple[ForwardBatch, Any, list[list[int]], list[list[int]]]:
    cache = new_cache(model, num_blocks=64)
    free = torch.randperm(64, generator=torch.Generator().manual_seed(5)).tolist()
    chunks, tables, prompts = [], [], []
    for i, (cached, new) in enumerate(SHAPES):
        prompt = random_tokens(cached + new, seed=40 + i)
        n_blocks = -(-(cached + new) // BLOCK)
        table, free = free[:n_blocks], free[n_blocks:]
        if cached:
            model(ForwardBatch.for_prefill(prompt[:cached], 0, table, BLOCK), cache)
        chunks.append(SeqChunk(prompt[cached:], cached, table))
        tables.append(table)
        prompts.append(prompt)
    return ForwardBatch.from_chunks(chunks, BLOCK), cache, tables, prompts


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("variant", ["llama", "mistral_window", "qwen2"])
def test_batched_prefill_equals_per_sequence_and_full_forward(
    tiny_bf16: Any, variant: str, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prefill_attention, "MAX_BATCHED_QUERY", 8)
    model = copy.deepcopy(tiny_bf16(variant).model).to(dtype)
    model.tie_weights()
    batch, cache, tables, prompts = _mixed_batch(model)
    meta = AttentionMetadata.build(batch, cache)
    assert meta.prefill_batch is not None
    assert meta.prefill_batch.seqs == [0, 1, 2, 3, 4]  # the 10-token chunk goes alone

    batched = model(batch, cache)
    model.batch_prefill = False
    assert AttentionMetadata.build(batch, cache, batch_prefill=False).prefill_batch is None
    reference = model(batch, cache)  # rewrites the same slots with the same values
    model.batch_prefill = True
    close = (
        (lambda a, b: torch.testing.assert_close(a, b, atol=1e-5, rtol=0))
        if dtype == torch.float32
        else assert_bf16_close
    )
    close(batched, reference)
    for i, prompt in enumerate(prompts):  # each sequence's prompt in one full forward
        fresh = new_cache(model, num_blocks=64)
        full = model(ForwardBatch.for_prefill(prompt, 0, tables[i], BLOCK), fresh)[0]
        close(batched[i], full)


def test_too_few_or_too_large_chunks_are_not_batched(tiny_bf16: Any) -> None:
    model = tiny_bf16("llama").model
    cache = new_cache(model, num_blocks=64)
    one = ForwardBatch.from_chunks([SeqChunk(random_tokens(3, 1), 4, [0, 1])], BLOCK)
    assert AttentionMetadata.build(one, cache).prefill_batch is None  # nothing to batch
    two = ForwardBatch.from_chunks(
        [SeqChunk(random_tokens(3, 1), 4, [0, 1]), SeqChunk(random_tokens(2, 2), 0, [2])], BLOCK
    )
    meta = AttentionMetadata.build(two, cache)
    assert meta.prefill_batch is not None and meta.prefill_batch.max_q == 3
    mask = meta.prefill_batch.mask(None)  # [S, 1, max_q, max_len]
    assert mask.shape == (2, 1, 3, 7)
    # seq 0: query 0 sits at position 4 and sees keys 0..4; seq 1's padding query sees key 0
    assert mask[0, 0, 0].tolist() == [True] * 5 + [False] * 2
    assert mask[1, 0, 2].tolist() == [True] + [False] * 6
