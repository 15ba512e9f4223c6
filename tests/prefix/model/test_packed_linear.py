"""Packed (oneDNN-prepacked, fused) linear layers against plain ``F.linear``, and a packed
model against the same model unpacked: cached-prefix reuse and batched decode must stay
exact within the bf16 tolerance, and packing must free the separate weights."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from prefix.config import EngineConfig
from prefix.model.forward_batch import ForwardBatch
from prefix.model.loader import LoadedModel, load_model
from prefix.model.packed_linear import PackedLinear, can_pack, reference_linear
from prefix.serve.engine import PrefixEngine
from tests.prefix.model.test_bf16 import (
    BLOCK,
    assert_bf16_close,
    assert_cached_suffix_matches_full,
    new_cache,
    random_tokens,
)
from tests.prefix.tiny_models import save_tiny_model

needs_packing = pytest.mark.skipif(
    not can_pack(torch.bfloat16, "cpu"),
    reason="oneDNN cannot pack bf16 here (no oneDNN, or a CPU without AVX512)",
)


def linears(sizes: list[int], in_features: int, bias: list[bool]) -> list[nn.Linear]:
    torch.manual_seed(1)
    layers = [nn.Linear(in_features, n, bias=b) for n, b in zip(sizes, bias, strict=True)]
    for layer in layers:
        nn.init.normal_(layer.weight, std=0.1)
        if layer.bias is not None:
            nn.init.normal_(layer.bias, std=0.1)
    return [layer.to(torch.bfloat16) for layer in layers]


def test_can_pack_only_bf16_on_cpu() -> None:
    assert not can_pack(torch.float32, "cpu")
    assert not can_pack(torch.float16, "cpu")
    assert not can_pack(torch.bfloat16, "cuda")
    # the probe agrees with oneDNN itself: where it says no, packing a bf16 weight raises
    # (AVX2-only CPUs), and where it says yes, packing works
    weight = torch.randn(16, 8).to(torch.bfloat16)
    if can_pack(torch.bfloat16, "cpu"):
        assert PackedLinear([nn.Linear(8, 16).to(torch.bfloat16)]).out_features == 16
    elif torch.backends.mkldnn.is_available():
        with pytest.raises(RuntimeError):
            torch.ops.mkldnn._reorder_linear_weight(weight, 4)


@needs_packing
@pytest.mark.parametrize("rows", [1, 7, 33, 300])
@pytest.mark.parametrize("bias", [[False, False, False], [True, True, True], [True, False, True]])
def test_packed_fused_product_equals_plain_linears(rows: int, bias: list[bool]) -> None:
    layers = linears([48, 16, 16], 40, bias)
    packed = PackedLinear(layers)
    x = torch.randn(rows, 40, generator=torch.Generator().manual_seed(rows)).to(torch.bfloat16)
    with torch.inference_mode():
        out = packed(x)
        expected = reference_linear(x, layers)
        assert out.shape == (rows, 80) and packed.split_sizes == [48, 16, 16]
        assert_bf16_close(out.float(), expected.float())
        # each original layer's output is its own column block
        for part, layer in zip(out.split(packed.split_sizes, -1), layers, strict=True):
            assert_bf16_close(part.float(), reference_linear(x, [layer]).float())


@needs_packing
def test_packed_linear_takes_leading_dims_and_rejects_bad_input() -> None:
    layers = linears([24], 8, [True])
    packed = PackedLinear(layers)
    x = torch.randn(3, 5, 8).to(torch.bfloat16)
    with torch.inference_mode():
        assert_bf16_close(packed(x).float(), reference_linear(x, layers).float())
        with pytest.raises(RuntimeError, match="bfloat16"):
            packed(x.float())
    with pytest.raises(ValueError, match="input width"):
        PackedLinear([*linears([4], 8, [False]), *linears([4], 6, [False])])
    with pytest.raises(ValueError, match="at least one"):
        PackedLinear([])
    # copies share the (read-only) packed weight instead of failing on it
    clone = copy.deepcopy(packed)
    assert clone.packed is packed.packed and clone.bias is not packed.bias


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """(plain, packed) bf16 copies of one tiny model per variant."""
    root: Path = tmp_path_factory.mktemp("tiny-packed")
    built: dict[str, tuple[LoadedModel, LoadedModel]] = {}

    def get(variant: str) -> tuple[LoadedModel, LoadedModel]:
        if variant not in built:
            save_tiny_model(root / variant, variant)

            def load() -> LoadedModel:
                return load_model(
                    str(root / variant),
                    device="cpu",
                    dtype=torch.bfloat16,
                    verbose=False,
                    cache_dir=root / "cache",
                )

            plain, packed = load(), load()
            assert packed.model.pack() and packed.model.is_packed
            built[variant] = (plain, packed)
        return built[variant]

    return get


@needs_packing
@pytest.mark.parametrize("variant", ["llama", "qwen2", "mistral_window"])
def test_packing_frees_the_separate_weights(tiny_pair: Any, variant: str) -> None:
    plain, packed = tiny_pair(variant)
    attn, mlp = packed.model.layers[0].self_attn, packed.model.layers[0].mlp
    assert attn.q_proj is None and attn.k_proj is None and attn.v_proj is None
    assert mlp.gate_proj is None and mlp.up_proj is None
    assert isinstance(attn.qkv_proj, PackedLinear) and isinstance(mlp.down_proj, PackedLinear)
    # qwen2's q/k/v biases travel into the fused product
    assert (attn.qkv_proj.bias is not None) == (variant == "qwen2")
    assert packed.model.num_parameters() < plain.model.num_parameters()
    assert packed.model.pack()  # idempotent


@needs_packing
@pytest.mark.parametrize("variant", ["llama", "qwen2", "mistral_window"])
@pytest.mark.parametrize("hit", [BLOCK, 7, 12])
def test_packed_suffix_after_cached_prefix_matches_full(
    tiny_pair: Any, variant: str, hit: int
) -> None:
    plain, packed = tiny_pair(variant)
    full, table = assert_cached_suffix_matches_full(packed.model, random_tokens(21, seed=5), hit)
    # and the packed model computes what the plain one does
    reference = plain.model(
        ForwardBatch.for_prefill(random_tokens(21, seed=5), 0, table, BLOCK, all_logits=True),
        new_cache(plain.model),
    )
    assert_bf16_close(full, reference)


@needs_packing
def test_packed_batched_decode_matches_each_sequence_alone(tiny_pair: Any) -> None:
    _, packed = tiny_pair("llama")
    model = packed.model
    lengths = [3, 17, 9]
    cache = new_cache(model, num_blocks=40)
    free = torch.randperm(40, generator=torch.Generator().manual_seed(2)).tolist()
    tables = []
    for i, n in enumerate(lengths):
        tables.append(free[: n // BLOCK + 1])
        free = free[n // BLOCK + 1 :]
        model(ForwardBatch.for_prefill(random_tokens(n, seed=60 + i), 0, tables[-1], BLOCK), cache)
    new_tokens = random_tokens(len(lengths), seed=61)
    batched = model(ForwardBatch.for_decode(new_tokens, lengths, tables, BLOCK), cache)
    for i, (tok, n, table) in enumerate(zip(new_tokens, lengths, tables, strict=True)):
        alone = model(ForwardBatch.for_decode([tok], [n], [table], BLOCK), cache)
        assert_bf16_close(batched[i : i + 1], alone)


def test_engine_packs_bf16_only_when_configured(tmp_path: Path, tiny_llama: LoadedModel) -> None:
    save_tiny_model(tmp_path / "m", "llama")

    def load() -> LoadedModel:
        return load_model(
            str(tmp_path / "m"),
            device="cpu",
            dtype=torch.bfloat16,
            verbose=False,
            cache_dir=tmp_path / "cache",
        )

    packed_engine = PrefixEngine(EngineConfig(block_size=BLOCK, num_blocks=32), loaded=load())
    plain_engine = PrefixEngine(
        EngineConfig(block_size=BLOCK, num_blocks=32, pack_linears=False), loaded=load()
    )
    # packed where oneDNN can pack bf16; elsewhere (AVX2-only CPUs) the engine keeps the
    # plain layers instead of failing at load
    assert packed_engine.loaded.model.is_packed == can_pack(torch.bfloat16, "cpu")
    assert not plain_engine.loaded.model.is_packed
    # float32: packing is not faster there, so it is not applied even when asked for
    fp32 = PrefixEngine(EngineConfig(block_size=BLOCK, num_blocks=32), loaded=tiny_llama)
    assert not fp32.loaded.model.is_packed
