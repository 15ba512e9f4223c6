"""PagedKVCache: layout, sizing arithmetic, and slot addressing through block tables."""

from __future__ import annotations

import pytest
import torch

from prefix.errors import EngineConfigError
from prefix.model.config import ModelConfig
from prefix.model.kv_cache import PagedKVCache

LAYERS, KV_HEADS, HEAD_DIM, BLOCK = 3, 2, 8, 4


def make_cache(num_blocks: int = 10) -> PagedKVCache:
    return PagedKVCache(LAYERS, KV_HEADS, HEAD_DIM, num_blocks, BLOCK)


def slots_for(table: list[int], length: int, start: int = 0) -> torch.Tensor:
    return torch.tensor([table[p // BLOCK] * BLOCK + p % BLOCK for p in range(start, length)])


def test_shape_and_properties() -> None:
    cache = make_cache(10)
    assert cache.kv.shape == (LAYERS, 2, 10, BLOCK, KV_HEADS, HEAD_DIM)
    assert cache.kv.dtype == torch.float32
    assert cache.num_blocks == 10
    assert cache.block_size == BLOCK
    assert cache.bytes_per_token == LAYERS * 2 * KV_HEADS * HEAD_DIM * 4
    assert cache.bytes_per_block == cache.bytes_per_token * BLOCK
    assert cache.total_bytes == cache.kv.numel() * cache.kv.element_size()


def test_from_budget_sizing_smollm2_dims() -> None:
    # SmolLM2-135M: 30 layers, 3 KV heads, head_dim 64
    per_token_fp32 = 30 * 2 * 3 * 64 * 4
    per_block = per_token_fp32 * 16
    cache = PagedKVCache.from_budget(7 * per_block + per_block - 1, 30, 3, 64, block_size=16)
    assert cache.bytes_per_token == per_token_fp32 == 46080
    assert cache.num_blocks == 7  # floor: a partial block is never allocated
    half = PagedKVCache.from_budget(per_block, 30, 3, 64, 16, dtype=torch.bfloat16)
    assert half.bytes_per_token == per_token_fp32 // 2
    assert half.num_blocks == 2


def test_budget_smaller_than_one_block_is_an_error() -> None:
    per_block = LAYERS * 2 * KV_HEADS * HEAD_DIM * 4 * BLOCK
    with pytest.raises(EngineConfigError, match="smaller than one block"):
        PagedKVCache.from_budget(per_block - 1, LAYERS, KV_HEADS, HEAD_DIM, BLOCK)
    with pytest.raises(ValueError):  # EngineConfigError is also a ValueError
        PagedKVCache.from_budget(0, LAYERS, KV_HEADS, HEAD_DIM, BLOCK)
    with pytest.raises(EngineConfigError):
        PagedKVCache(LAYERS, KV_HEADS, HEAD_DIM, 0, BLOCK)


def test_for_model_needs_exactly_one_size() -> None:
    cfg = ModelConfig(
        num_layers=LAYERS,
        hidden_size=32,
        intermediate_size=64,
        num_heads=4,
        num_kv_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        vocab_size=16,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
    )
    assert PagedKVCache.for_model(cfg, BLOCK, num_blocks=5).num_blocks == 5
    assert PagedKVCache.for_model(cfg, BLOCK, memory_bytes=make_cache(1).bytes_per_block * 3)
    with pytest.raises(EngineConfigError):
        PagedKVCache.for_model(cfg, BLOCK)
    with pytest.raises(EngineConfigError):
        PagedKVCache.for_model(cfg, BLOCK, num_blocks=2, memory_bytes=10**6)


def test_write_gather_round_trip_through_shuffled_table() -> None:
    cache = make_cache(10)
    table = [7, 2, 5]  # non-contiguous, out of order
    length = 11  # the last block is only partly filled
    gen = torch.Generator().manual_seed(0)
    k = torch.randn(length, KV_HEADS, HEAD_DIM, generator=gen)
    v = torch.randn(length, KV_HEADS, HEAD_DIM, generator=gen)
    # write in two steps, as a cached prefix + a suffix would be
    cache.write(1, slots_for(table, 5), k[:5], v[:5])
    cache.write(1, slots_for(table, length, start=5), k[5:], v[5:])
    k_out, v_out = cache.gather(1, torch.tensor(table), length)
    assert k_out.shape == (length, KV_HEADS, HEAD_DIM)
    assert torch.equal(k_out, k) and torch.equal(v_out, v)
    # exact physical placement: token 4 is block table[1]=2, offset 0
    assert torch.equal(cache.kv[1, 0, 2, 0], k[4])
    assert torch.equal(cache.kv[1, 1, 5, 2], v[10])
    # nothing else was touched: other layers and unlisted blocks are still zero
    untouched = [b for b in range(10) if b not in table]
    assert cache.kv[:, :, untouched].abs().sum() == 0
    assert cache.kv[0].abs().sum() == 0 and cache.kv[2].abs().sum() == 0


def test_gather_padded_matches_per_sequence_gather() -> None:
    cache = make_cache(12)
    gen = torch.Generator().manual_seed(1)
    tables = [[9, 0, 4], [3], [11, 6]]
    lengths = [10, 2, 8]
    for table, length in zip(tables, lengths, strict=True):
        kv = torch.randn(2, length, KV_HEADS, HEAD_DIM, generator=gen)
        cache.write(0, slots_for(table, length), kv[0], kv[1])
    padded = torch.zeros(3, 3, dtype=torch.long)
    for i, table in enumerate(tables):
        padded[i, : len(table)] = torch.tensor(table)
    k_pad, v_pad = cache.gather_padded(0, padded, max(lengths))
    assert k_pad.shape == (3, 10, KV_HEADS, HEAD_DIM)
    for i, (table, length) in enumerate(zip(tables, lengths, strict=True)):
        k, v = cache.gather(0, torch.tensor(table), length)
        assert torch.equal(k_pad[i, :length], k) and torch.equal(v_pad[i, :length], v)


def test_gather_longer_than_table_is_an_error() -> None:
    cache = make_cache(4)
    with pytest.raises(ValueError):
        cache.gather(0, torch.tensor([1, 2]), 2 * BLOCK + 1)


def test_copy_block_copies_every_layer() -> None:
    cache = make_cache(4)
    cache.kv[:, :, 1] = torch.randn(LAYERS, 2, BLOCK, KV_HEADS, HEAD_DIM)
    cache.copy_block(1, 3)
    assert torch.equal(cache.kv[:, :, 3], cache.kv[:, :, 1])
    assert cache.kv[:, :, 0].abs().sum() == 0
