"""bfloat16 runs: cached-prefix reuse and batched decode against a full forward in the
same dtype, the two decode backends against each other, and bf16 vs fp32 greedy output
of the bundled SmolLM2.

Tolerance. The logits leave ``lm_head`` in bf16 (8 significant bits), so two exact
computations that only accumulate in a different order (a suffix after a cached
prefix vs one full pass, decode over gathered K/V vs prefill) land a few
representable values apart: at |logit| in [16, 32) one bf16 step is 0.125, and every
layer rounds its residual stream to bf16, so a one-step difference early on can
compound through the layers. We allow ``BF16_ULPS`` = 4 steps at the magnitude of the
largest logit compared. Measured: a cached-prefix suffix of a short prompt equals the
full pass exactly on SmolLM2 (over 300 tokens on a CPU with AMX it does not: oneDNN
picks its bf16 kernel by row count; tests/prefix/kernels/test_flash_attention.py bounds
that case by the distance to float32), decode steps differ by up to 2.5 steps (0.32),
while bf16 vs fp32 differ by 1.56 (12 steps); a corrupted cached block moves logits
far outside (negative control).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.dtype_agreement import PROMPTS, bf16_copy, chat_ids, compare
from prefix.model.forward_batch import ForwardBatch
from prefix.model.kv_cache import PagedKVCache
from prefix.model.llama import LlamaModel
from prefix.model.loader import LoadedModel, load_model
from tests.prefix.tiny_models import VOCAB, save_tiny_model

BLOCK = 4
BF16_ULPS = 4


def bf16_tolerance(reference: torch.Tensor) -> float:
    """BF16_ULPS bf16 steps at the largest |value| of ``reference``."""
    largest = float(reference.abs().max())
    return BF16_ULPS * 2.0 ** (math.floor(math.log2(largest)) - 7)


def assert_bf16_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, atol=bf16_tolerance(expected), rtol=0)


def random_tokens(n: int, seed: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (n,), generator=gen).tolist()


def new_cache(model: LlamaModel, num_blocks: int = 32, block_size: int = BLOCK) -> PagedKVCache:
    return PagedKVCache.for_model(
        model.config, block_size, num_blocks=num_blocks, dtype=model.dtype
    )


@pytest.fixture(scope="module")
def tiny_bf16(tmp_path_factory: pytest.TempPathFactory) -> Any:
    built: dict[str, LoadedModel] = {}
    root: Path = tmp_path_factory.mktemp("tiny-bf16")

    def get(variant: str) -> LoadedModel:
        if variant not in built:
            save_tiny_model(root / variant, variant)
            built[variant] = load_model(
                str(root / variant),
                device="cpu",
                dtype=torch.bfloat16,
                verbose=False,
                cache_dir=root / "cache",
            )
        return built[variant]

    return get


def assert_cached_suffix_matches_full(
    model: LlamaModel, tokens: list[int], hit: int
) -> tuple[torch.Tensor, list[int]]:
    """Prefill ``tokens[:hit]``, then the rest over the cached prefix: the suffix's logits
    must equal the full forward's, and a corrupted cached block must move them far off.
    Returns (the full forward's logits, the block table used)."""
    table = torch.randperm(32, generator=torch.Generator().manual_seed(hit))[:6].tolist()
    full = model(
        ForwardBatch.for_prefill(tokens, 0, table, BLOCK, all_logits=True), new_cache(model)
    )
    cache = new_cache(model)
    model(ForwardBatch.for_prefill(tokens[:hit], 0, table, BLOCK), cache)
    suffix = model(
        ForwardBatch.for_prefill(tokens[hit:], hit, table, BLOCK, all_logits=True), cache
    )
    assert_bf16_close(suffix, full[hit:])
    # negative control: corrupting the cached block that holds position hit-1 (inside
    # every window) moves the first suffix row far outside the tolerance
    cache.kv[:, :, table[(hit - 1) // BLOCK]] += 2.0
    again = ForwardBatch.for_prefill(tokens[hit:], hit, table, BLOCK, all_logits=True)
    wrong = model(again, cache)[0]
    assert (wrong - full[hit]).abs().max() > 2 * bf16_tolerance(full[hit])
    return full, table


@pytest.mark.parametrize("variant", ["llama", "qwen2", "mistral_window", "llama3_rope"])
@pytest.mark.parametrize("hit", [BLOCK, 7, 12, 20])
def test_bf16_suffix_after_cached_prefix_matches_full(
    tiny_bf16: Any, variant: str, hit: int
) -> None:
    model = tiny_bf16(variant).model
    assert model.dtype == torch.bfloat16
    assert_cached_suffix_matches_full(model, random_tokens(21, seed=3), hit)


def prefill_ragged(model: LlamaModel, cache: PagedKVCache, lengths: list[int]) -> list[list[int]]:
    """Prefill sequences of ``lengths`` into disjoint shuffled blocks; their tables."""
    free = torch.randperm(cache.num_blocks, generator=torch.Generator().manual_seed(7)).tolist()
    tables = []
    for i, n in enumerate(lengths):
        need = (n + 1 + BLOCK - 1) // BLOCK  # room for the decoded token
        tables.append(free[:need])
        free = free[need:]
        model(ForwardBatch.for_prefill(random_tokens(n, seed=40 + i), 0, tables[-1], BLOCK), cache)
    return tables


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("variant", ["llama", "mistral_window"])
def test_decode_backends_agree(tiny_bf16: Any, variant: str, dtype: torch.dtype) -> None:
    model = copy.deepcopy(tiny_bf16(variant).model).to(dtype)
    model.tie_weights()
    lengths = [3, 17, 9, 12, 1]
    cache = new_cache(model, num_blocks=40)
    tables = prefill_ragged(model, cache, lengths)
    batch = ForwardBatch.for_decode(random_tokens(len(lengths), seed=9), lengths, tables, BLOCK)
    outputs = {}
    for backend in ("paged", "sdpa", "gather"):
        model.decode_backend = backend
        outputs[backend] = model(batch, cache)  # rewrites the same slots, same values
    model.decode_backend = "paged"
    for backend in ("paged", "sdpa"):
        if dtype == torch.float32:
            torch.testing.assert_close(outputs[backend], outputs["gather"], atol=1e-5, rtol=0)
        else:
            assert_bf16_close(outputs[backend], outputs["gather"])


def test_unknown_decode_backend_is_rejected(tiny_bf16: Any) -> None:
    model = copy.deepcopy(tiny_bf16("llama").model)
    model.decode_backend = "flash"
    batch = ForwardBatch.for_decode([5], [0], [[0]], BLOCK)
    with pytest.raises(ValueError, match="decode_backend"):
        model(batch, new_cache(model))


# ---------------------------------------------------------------- real SmolLM2


@pytest.fixture(scope="module")
def smol_bf16(smol_loaded: LoadedModel) -> LlamaModel:
    return bf16_copy(smol_loaded.model)


@pytest.fixture(scope="module")
def smol_bf16_packed(smol_loaded: LoadedModel) -> LlamaModel:
    """The engine's form on a bf16 CPU: linears prepacked, q/k/v and gate/up fused."""
    model = bf16_copy(smol_loaded.model)
    if not model.pack():
        pytest.skip("oneDNN cannot pack bf16 here (no oneDNN, or a CPU without AVX512)")
    return model


@pytest.mark.slow
@pytest.mark.parametrize("packed", [False, True])
def test_smollm2_bf16_cached_prefix_and_decode_match_full(
    smol_loaded: LoadedModel, request: pytest.FixtureRequest, packed: bool
) -> None:
    model: LlamaModel = request.getfixturevalue("smol_bf16_packed" if packed else "smol_bf16")
    tokens = chat_ids(smol_loaded.tokenizer, PROMPTS[3])
    assert len(tokens) > 32
    table = [6, 1, 4, 0, 3]

    def full(seq: list[int]) -> torch.Tensor:
        batch = ForwardBatch.for_prefill(seq, 0, table, 16, all_logits=True)
        return model(batch, new_cache(model, num_blocks=8, block_size=16))

    cache = new_cache(model, num_blocks=8, block_size=16)
    model(ForwardBatch.for_prefill(tokens[:32], 0, table, 16), cache)
    suffix = model(ForwardBatch.for_prefill(tokens[32:], 32, table, 16, all_logits=True), cache)
    reference = full(tokens)
    assert_bf16_close(suffix, reference[32:])
    generated = list(tokens)
    expected = reference[-1]
    for _ in range(3):  # greedy steps through the paged decode path
        generated.append(int(expected.argmax()))
        step = ForwardBatch.for_decode([generated[-1]], [len(generated) - 1], [table], 16)
        expected = full(generated)[-1]
        assert_bf16_close(model(step, cache)[0], expected)


@pytest.mark.slow
@pytest.mark.parametrize("packed", [False, True])
def test_smollm2_greedy_bf16_agrees_with_fp32(
    smol_loaded: LoadedModel, request: pytest.FixtureRequest, packed: bool
) -> None:
    model: LlamaModel = request.getfixturevalue("smol_bf16_packed" if packed else "smol_bf16")
    # a loose floor; bench/dtype_agreement.py reports the exact figures on all prompts
    _, summary = compare(smol_loaded.model, model, smol_loaded.tokenizer, PROMPTS[:3], 12)
    assert summary["teacher_forced_top1"] >= 0.85
    assert summary["free_running_prefix"] >= 0.25
