"""The native paged kernel (decode steps and short prefill chunks over paged contexts):
against a float32 reference per sequence, against SDPA's bf16 error, and in the model
against the gather backend, the per-sequence prefill path and each sequence alone.

Phase 1 of the kernel reads the prefix the sequences share (whole 32-key blocks of it)
once for all of them; phase 2 each sequence's own keys, causally. The cases below put
the shared length on and off those 32-key boundaries, and include batches with nothing
shared. Tolerance as in test_flash_attention.py.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from prefix.errors import KernelUnavailableError
from prefix.kernels import flash_attention
from prefix.kernels.flash_attention import FlashAttention
from prefix.model.decode_attention import DecodeMetadata
from prefix.model.dtype import cpu_flags
from prefix.model.forward_batch import ForwardBatch
from tests.prefix.kernels.test_flash_attention import kernel as kernel  # fixture
from tests.prefix.kernels.test_flash_attention import reference
from tests.prefix.kernels.test_flash_attention import tiny_d64 as tiny_d64  # fixture
from tests.prefix.model.test_bf16 import assert_bf16_close
from tests.prefix.model.test_bf16 import tiny_bf16 as tiny_bf16  # what tiny_d64 uses
from tests.prefix.model.test_decode_attention import decode_with_shared_prefix

pytestmark = pytest.mark.skipif(
    not flash_attention.cpu_supports(cpu_flags()), reason="the CPU lacks AVX512-BF16"
)


def paged_batch(
    lens: list[int], shared_len: int, block: int, kv_heads: int, dim: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """A cache of random K/V where every sequence holds the same physical blocks for its
    first ``shared_len`` keys; returns (k_slots, v_slots, padded tables, contexts)."""
    gen = torch.Generator().manual_seed(seed)
    shared_blocks = shared_len // block
    own = [-(-n // block) - shared_blocks for n in lens]
    num_blocks = shared_blocks + sum(own) + 3
    k_slots = torch.randn(num_blocks * block, kv_heads, dim, generator=gen).to(torch.bfloat16)
    v_slots = torch.randn(num_blocks * block, kv_heads, dim, generator=gen).to(torch.bfloat16)
    free = torch.randperm(num_blocks, generator=gen).tolist()
    shared, free = free[:shared_blocks], free[shared_blocks:]
    tables = []
    for n in own:
        tables.append(shared + free[:n])
        free = free[n:]
    width = max(len(t) for t in tables)
    padded = torch.zeros(len(lens), width, dtype=torch.long)
    contexts = []
    for i, (t, n) in enumerate(zip(tables, lens, strict=True)):
        padded[i, : len(t)] = torch.tensor(t)
        slots = torch.tensor([t[j // block] * block + j % block for j in range(n)])
        contexts.append(slots)
    return k_slots, v_slots, padded, contexts


def per_sequence(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """Causal attention of the last len(q) positions of a context [L, Hkv, D]: [n, H, D]."""
    return reference(q, k, v, None, dtype)


CASES = [
    # sequence lengths, new tokens each, shared length, block size, heads, kv heads, dim
    ([5], 1, 0, 16, 9, 3, 64),  # one stream
    ([700, 713, 701, 750], 1, 688, 16, 9, 3, 64),  # a shared prompt, short tails
    ([40, 90, 33], 1, 32, 16, 9, 3, 64),  # exactly one shared 32-key block
    ([100, 120], 1, 48, 16, 9, 3, 64),  # shared length off the 32-key grid
    ([64, 30, 200, 129], 1, 0, 16, 12, 2, 128),  # nothing shared, groups of six
    ([300] * 32, 1, 288, 16, 9, 3, 64),  # 32 streams
    ([77, 99], 1, 76, 4, 4, 4, 64),  # no grouping, block size 4
    ([720, 730, 705], 20, 672, 16, 9, 3, 64),  # questions after a shared prompt
    ([60, 45], 45, 0, 16, 9, 3, 64),  # cold chunks, nothing cached
    ([150, 170, 99], 37, 48, 16, 4, 2, 128),  # chunks crossing key blocks, head dim 128
]


@pytest.mark.parametrize(("lens", "new", "shared_len", "block", "heads", "kv_heads", "dim"), CASES)
def test_matches_each_sequence_alone(
    kernel: FlashAttention,
    lens: list[int],
    new: int,
    shared_len: int,
    block: int,
    heads: int,
    kv_heads: int,
    dim: int,
) -> None:
    k_slots, v_slots, tables, contexts = paged_batch(lens, shared_len, block, kv_heads, dim, 3)
    # the batch's queries are not the first rows of q: rows 0..2 belong to another chunk
    rows = 3 + new * len(lens)
    q = torch.randn(rows, heads, dim, generator=torch.Generator().manual_seed(4))
    q = q.to(torch.bfloat16)
    starts = [3 + new * i for i in range(len(lens))]
    plan = kernel.plan_paged(
        starts,
        [new] * len(lens),
        lens,
        tables,
        shared_len,
        block,
        k_slots.shape[0] // block,
        rows,
    )
    out = torch.full_like(q, 7.0)
    kernel.attend_paged(q, k_slots, v_slots, plan, out)
    assert torch.equal(out[:3], torch.full_like(out[:3], 7.0))  # other rows untouched
    for i, slots in enumerate(contexts):
        mine = q[starts[i] : starts[i] + new]
        exact = per_sequence(mine, k_slots[slots], v_slots[slots], torch.float32)
        sdpa = per_sequence(mine, k_slots[slots], v_slots[slots], torch.bfloat16) - exact
        bound = 2 * sdpa.abs().max().item() + 2**-9
        got = out[starts[i] : starts[i] + new].float()
        assert (got - exact).abs().max().item() <= bound
        # negative control: attending only the second half of the context (the shared
        # prefix, for most cases) is visibly different
        half = slots[len(slots) // 2 :]
        fewer = per_sequence(mine, k_slots[half], v_slots[half], torch.float32)
        assert len(slots) == 1 or (fewer - exact).abs().max().item() > 2 * bound


def test_plan_refuses_bad_tables(kernel: FlashAttention) -> None:
    tables = torch.tensor([[0, 1], [0, 2]])

    def plan(lens: list[int], shared: int, num_blocks: int = 3, new: int = 1) -> object:
        return kernel.plan_paged(
            [0, new], [new, new], lens, tables, shared, 16, num_blocks, 2 * new
        )

    with pytest.raises(KernelUnavailableError, match="outside the cache"):
        plan([20, 20], 16, num_blocks=2)
    with pytest.raises(KernelUnavailableError, match="longer than its block table"):
        plan([20, 40], 16)
    with pytest.raises(KernelUnavailableError, match="inside the shared prefix"):
        plan([16, 20], 16)
    with pytest.raises(KernelUnavailableError, match="inside the shared prefix"):
        plan([20, 20], 16, new=5)
    with pytest.raises(KernelUnavailableError, match="outside q"):
        kernel.plan_paged([0, 2], [1, 1], [20, 20], tables, 16, 16, 3, 2)
    assert plan([17, 20], 16)


@pytest.mark.parametrize("variant", ["llama_d64", "mistral_window_d64"])
@pytest.mark.parametrize(("prefix_len", "tails"), [(72, [1, 5, 13, 2, 9]), (8, [3, 60])])
def test_model_decode_with_kernel_equals_the_other_paths(
    tiny_d64: Any, kernel: FlashAttention, variant: str, prefix_len: int, tails: list[int]
) -> None:
    model = copy.deepcopy(tiny_d64(variant).model)
    batch, cache = decode_with_shared_prefix(model, prefix_len, tails)
    model.flash_attention = kernel
    meta = DecodeMetadata.build(
        batch.block_tables,
        batch.seq_lens,
        cache,
        "paged",
        kernel,
        need_rows=model.is_windowed,
    )
    assert meta.plan is not None and meta.shared_len == prefix_len
    assert (meta.rows is None) is (not model.is_windowed)
    native = model(batch, cache)  # rewrites the same slots, same values
    model.flash_attention = None
    model.decode_backend = "gather"
    gathered = model(batch, cache)
    assert_bf16_close(native, gathered)
    # each sequence decoded alone through the kernel (nothing shared) gives its row
    model.flash_attention = kernel
    model.decode_backend = "paged"
    for i in range(batch.num_seqs):
        alone = ForwardBatch.for_decode(
            [int(batch.input_ids[i])],
            [batch.seq_lens[i] - 1],
            [batch.block_tables[i].tolist()],
            4,
        )
        assert_bf16_close(model(alone, cache)[0], native[i])


@pytest.mark.parametrize("variant", ["llama_d64", "mistral_window_d64"])
def test_model_batched_prefill_with_kernel_equals_per_sequence_path(
    tiny_d64: Any, kernel: FlashAttention, variant: str
) -> None:
    """Questions after one cached prompt (the same blocks), ragged, plus an uncached
    prompt and a chunk too long to batch, in one forward: the kernel's batched call
    against the per-sequence SDPA path and each prompt's own full forward."""
    from prefix.model.forward_batch import SeqChunk
    from prefix.model.llama import AttentionMetadata
    from tests.prefix.model.test_bf16 import new_cache, random_tokens

    model = copy.deepcopy(tiny_d64(variant).model)
    block = 4
    cache = new_cache(model, num_blocks=200, block_size=block)
    free = torch.randperm(200, generator=torch.Generator().manual_seed(5)).tolist()
    system = random_tokens(72, seed=1)
    shared, free = free[:18], free[18:]
    model(ForwardBatch.for_prefill(system, 0, shared, block), cache)
    chunks, tables, prompts = [], [], []
    for i, (cached, new) in enumerate([(72, 9), (72, 1), (72, 30), (0, 12), (72, 140)]):
        prompt = (system if cached else []) + random_tokens(new, seed=40 + i)
        own = -(-len(prompt) // block) - (18 if cached else 0)
        table = (shared if cached else []) + free[:own]
        free = free[own:]
        chunks.append(SeqChunk(prompt[cached:], cached, table))
        tables.append(table)
        prompts.append(prompt)
    batch = ForwardBatch.from_chunks(chunks, block)
    model.flash_attention = kernel
    meta = AttentionMetadata.build(batch, cache, flash=kernel, windowed=model.is_windowed)
    assert meta.prefill_batch is not None and meta.prefill_batch.plan is not None
    assert meta.prefill_batch.seqs == [0, 1, 2, 3]  # the 140-token chunk goes alone
    # the uncached prompt shares nothing, so nothing is read once for all
    assert meta.prefill_batch.plan.shared_len == 0
    native = model(batch, cache)
    model.flash_attention = None
    model.batch_prefill = False
    reference = model(batch, cache)  # rewrites the same slots with the same values
    assert_bf16_close(native, reference)
    model.flash_attention = kernel
    model.batch_prefill = True
    for i, prompt in enumerate(prompts):
        fresh = new_cache(model, num_blocks=200, block_size=block)
        full = model(ForwardBatch.for_prefill(prompt, 0, tables[i], block), fresh)[0]
        assert_bf16_close(native[i], full)
    # without the uncached prompt the four questions share the system prompt's blocks
    sharing = ForwardBatch.from_chunks([chunks[i] for i in (0, 1, 2)], block)
    meta = AttentionMetadata.build(sharing, cache, flash=kernel, windowed=model.is_windowed)
    assert meta.prefill_batch is not None and meta.prefill_batch.plan is not None
    assert meta.prefill_batch.plan.shared_len == 72
    together = model(sharing, cache)
    for row, i in enumerate((0, 1, 2)):
        assert_bf16_close(together[row], native[i])
