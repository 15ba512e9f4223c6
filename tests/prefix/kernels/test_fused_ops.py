"""The fused element-wise kernels against the torch ops they replace (bit for bit on
random inputs, as they round where torch rounds), and the fused model against the
unfused one (tiny Llama and the real SmolLM2, packed as the engine runs them)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from prefix.errors import KernelUnavailableError
from prefix.kernels import flash_attention
from prefix.kernels.flash_attention import FlashAttention
from prefix.kernels.fused_ops import FusedOps
from prefix.model.dtype import cpu_flags
from prefix.model.forward_batch import ForwardBatch
from prefix.model.kv_cache import PagedKVCache
from prefix.model.llama import LlamaModel
from prefix.model.loader import LoadedModel
from prefix.model.rope import apply_rope
from tests.prefix.kernels.test_flash_attention import kernel as kernel  # fixture
from tests.prefix.kernels.test_flash_attention import tiny_d64 as tiny_d64  # fixture
from tests.prefix.model.test_bf16 import assert_bf16_close, random_tokens
from tests.prefix.model.test_bf16 import tiny_bf16 as tiny_bf16  # what tiny_d64 uses

pytestmark = pytest.mark.skipif(
    not flash_attention.cpu_supports(cpu_flags()), reason="the CPU lacks AVX512-BF16"
)


@pytest.fixture(scope="module")
def fused(kernel: FlashAttention) -> FusedOps:
    return FusedOps(kernel.library)


def rand(*shape: int, scale: float = 1.0, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen) * scale).to(torch.bfloat16)


@pytest.mark.parametrize("rows", [1, 7, 300])
def test_silu_mul_equals_torch(fused: FusedOps, rows: int) -> None:
    gate_up = rand(rows, 2 * 1536, scale=4.0, seed=rows)
    expected = F.silu(gate_up[:, :1536]) * gate_up[:, 1536:]
    assert torch.equal(fused.silu_mul(gate_up), expected)


@pytest.mark.parametrize("rows", [1, 33, 300])
@pytest.mark.parametrize("with_delta", [True, False])
def test_add_rms_norm_equals_torch(fused: FusedOps, rows: int, with_delta: bool) -> None:
    x, delta = rand(rows, 576, scale=3.0, seed=1), rand(rows, 576, seed=2)
    weight = (torch.rand(576, generator=torch.Generator().manual_seed(3)) + 0.5).bfloat16()
    summed = x + delta if with_delta else x.clone()
    expected = weight * F.rms_norm(summed.float(), (576,), eps=1e-5).to(torch.bfloat16)
    residual = x.clone()
    out = fused.add_rms_norm(residual, delta if with_delta else None, weight, 1e-5)
    assert torch.equal(residual, summed)  # the residual stream, updated in place
    assert torch.equal(out, expected)


def test_rope_equals_torch_on_the_strided_projection(fused: FusedOps) -> None:
    qkv = rand(200, 15 * 64, seed=4)
    view = qkv[:, : 12 * 64].view(200, 12, 64)  # q and k heads, a strided view
    cos, sin = rand(200, 64, seed=5), rand(200, 64, seed=6)
    assert torch.equal(fused.rope(view, cos, sin), apply_rope(view, cos, sin))
    # negative control: the roll matters
    assert not torch.equal(fused.rope(view, cos, sin), view * cos[:, None] + view * sin[:, None])


def test_bad_inputs_are_refused(fused: FusedOps) -> None:
    with pytest.raises(KernelUnavailableError):
        fused.silu_mul(rand(3, 40))  # width not a multiple of 32
    with pytest.raises(KernelUnavailableError):
        fused.add_rms_norm(rand(3, 64).float(), None, rand(64), 1e-5)
    with pytest.raises(KernelUnavailableError):
        fused.rope(rand(3, 2, 48), rand(3, 48), rand(3, 48))
    assert not FusedOps.supports(rand(3, 40))


def forward_logits(model: LlamaModel, tokens: list[int], hit: int) -> torch.Tensor:
    """A prefill of tokens[:hit], then the rest over it, then one decode step; logits."""
    block = 16
    blocks = -(-(len(tokens) + 1) // block)
    table = list(range(blocks))
    cache = PagedKVCache.for_model(model.config, block, num_blocks=blocks, dtype=model.dtype)
    model(ForwardBatch.for_prefill(tokens[:hit], 0, table, block), cache)
    rest = model(ForwardBatch.for_prefill(tokens[hit:], hit, table, block, all_logits=True), cache)
    step = model(ForwardBatch.for_decode([5], [len(tokens)], [table], block), cache)
    return torch.cat([rest, step])


@pytest.mark.parametrize("variant", ["llama_d64", "mistral_window_d64"])
def test_fused_model_equals_unfused(
    tiny_d64: Any, kernel: FlashAttention, fused: FusedOps, variant: str
) -> None:
    model = copy.deepcopy(tiny_d64(variant).model)
    assert model.pack()
    model.flash_attention = kernel
    tokens = random_tokens(90, seed=8)
    plain = forward_logits(model, tokens, 40)
    model.fused_ops = fused
    assert torch.equal(forward_logits(model, tokens, 40), plain)


@pytest.mark.slow
def test_smollm2_fused_equals_unfused(
    smol_loaded: LoadedModel, kernel: FlashAttention, fused: FusedOps
) -> None:
    from bench.dtype_agreement import PROMPTS, bf16_copy, chat_ids

    model = bf16_copy(smol_loaded.model)
    assert model.pack()
    model.flash_attention = kernel
    tokens = [t for p in PROMPTS for t in chat_ids(smol_loaded.tokenizer, p)][:200]
    plain = forward_logits(model, tokens, 120)
    model.fused_ops = fused
    together = forward_logits(model, tokens, 120)
    # bit for bit in practice; the bound is the suite's bf16 tolerance
    assert_bf16_close(together, plain)
