"""L2 host tier: blocks evicted from the GPU pool are kept in host memory and reused.

A tiny L1 pool (8 blocks of 4 tokens) is filled by other prompts until prompt A's
blocks are evicted; A is then served from L2 and must give the logits of a plain
full forward (an engine with prefix caching off).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from prefix.config import EngineConfig
from prefix.errors import EngineConfigError
from prefix.model.loader import LoadedModel
from prefix.model.sampling import SamplingParams
from prefix.serve.engine import PrefixEngine
from prefix.tiers.host import HostTier

ATOL = 1e-4
BLOCK = 4
L2_BYTES = 1 << 20  # far more than the test needs


def tokens(n: int, seed: int = 0, vocab: int = 128) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n,), generator=gen).tolist()


def make(loaded: LoadedModel, **kw: Any) -> PrefixEngine:
    cfg = {"block_size": BLOCK, "num_blocks": 8, "host_tier_bytes": L2_BYTES} | kw
    return PrefixEngine(EngineConfig(**cfg), loaded=loaded)


def keys_of(engine: PrefixEngine, prompt: list[int], namespace: str) -> list[bytes]:
    req = engine.request(prompt, SamplingParams(max_tokens=1), namespace=namespace)
    seq = engine.new_sequence(req)
    seq.extend_keys()
    return seq.block_keys


def push_out(engine: PrefixEngine, namespace: str = "other", seed: int = 100) -> None:
    """Fill L1 with other prompts until every earlier block has been evicted."""
    for i in range(3):
        engine.prefill_logits(tokens(13, seed=seed + i), namespace=namespace)
        engine.pool.check_integrity()


@pytest.fixture
def plain(tiny_llama: LoadedModel) -> PrefixEngine:
    return PrefixEngine(
        EngineConfig(block_size=BLOCK, num_blocks=64, enable_prefix_caching=False),
        loaded=tiny_llama,
    )


A = tokens(13, seed=1)  # 3 full blocks + 1 token: 3 reusable blocks


def test_evicted_prefix_is_served_from_l2(tiny_llama: LoadedModel, plain: PrefixEngine) -> None:
    engine = make(tiny_llama)
    tier = engine.host_tier
    assert tier is not None
    _, cached = engine.prefill_logits(A, namespace="t")
    assert cached == 0
    engine.pool.check_integrity()
    push_out(engine)
    a_keys = keys_of(engine, A, "t")[:3]
    assert all(engine.pool.lookup(k) is None for k in a_keys)  # gone from L1
    assert all(k in tier for k in a_keys)  # kept in L2

    hits_before = tier.hits
    logits, cached = engine.prefill_logits(A, namespace="t")
    engine.pool.check_integrity()
    reference, _ = plain.prefill_logits(A, namespace="t")
    assert cached == 12
    torch.testing.assert_close(logits, reference, atol=ATOL, rtol=0)
    assert tier.hits - hits_before == 3
    stats = tier.stats()
    assert stats["bytes_out"] == 3 * tier.bytes_per_block
    assert stats["bytes_in"] >= 3 * tier.bytes_per_block
    assert stats["seconds"] > 0
    # loaded blocks were committed into L1 again: the next request hits there
    assert all(engine.pool.lookup(k) is not None for k in a_keys)
    assert engine.pool.num_used_blocks == 0


def test_l1_hits_continue_into_l2(tiny_llama: LoadedModel, plain: PrefixEngine) -> None:
    engine = make(tiny_llama)
    engine.prefill_logits(A, namespace="t")
    push_out(engine)
    # A's first 9 tokens: 2 reusable blocks, loaded from L2 into L1
    _, cached = engine.prefill_logits(A[:9], namespace="t")
    assert cached == 8
    engine.pool.check_integrity()
    a_keys = keys_of(engine, A, "t")
    assert engine.pool.lookup(a_keys[0]) is not None
    assert engine.pool.lookup(a_keys[2]) is None
    queries, l1_hits = engine.pool.num_queries, engine.pool.num_hit_blocks
    # now A: 2 blocks from L1, the third from L2
    logits, cached = engine.prefill_logits(A, namespace="t")
    engine.pool.check_integrity()
    assert cached == 12
    assert engine.pool.num_hit_blocks - l1_hits == 2  # the pool counts only its own hits
    assert engine.pool.num_queries - queries == 3
    reference, _ = plain.prefill_logits(A, namespace="t")
    torch.testing.assert_close(logits, reference, atol=ATOL, rtol=0)


def test_l2_respects_namespaces(tiny_llama: LoadedModel, plain: PrefixEngine) -> None:
    engine = make(tiny_llama)
    engine.prefill_logits(A, namespace="tenant-a")
    push_out(engine)
    # negative: the same tokens under another namespace find nothing in either tier
    logits, cached = engine.prefill_logits(A, namespace="tenant-b")
    assert cached == 0
    engine.pool.check_integrity()
    reference, _ = plain.prefill_logits(A, namespace="tenant-b")
    torch.testing.assert_close(logits, reference, atol=ATOL, rtol=0)
    # positive control: the owner still hits in L2
    push_out(engine, seed=200)
    logits, cached = engine.prefill_logits(A, namespace="tenant-a")
    assert cached == 12
    engine.pool.check_integrity()
    torch.testing.assert_close(logits, reference, atol=ATOL, rtol=0)


def test_missing_first_block_reuses_nothing(tiny_llama: LoadedModel, plain: PrefixEngine) -> None:
    engine = make(tiny_llama)
    tier = engine.host_tier
    assert tier is not None
    engine.prefill_logits(A, namespace="t")
    push_out(engine)
    a_keys = keys_of(engine, A, "t")
    assert tier.discard(a_keys[0])
    assert engine.pool.lookup(a_keys[0]) is None
    assert a_keys[1] in tier and a_keys[2] in tier  # later blocks still in L2
    misses = tier.misses
    logits, cached = engine.prefill_logits(A, namespace="t")
    engine.pool.check_integrity()
    assert cached == 0
    assert tier.misses - misses == 1
    reference, _ = plain.prefill_logits(A, namespace="t")
    torch.testing.assert_close(logits, reference, atol=ATOL, rtol=0)


def test_engine_tier_is_bounded(tiny_llama: LoadedModel) -> None:
    engine = make(tiny_llama, host_tier_bytes=2 * 2048 + 100)  # 2 blocks of the tiny model
    tier = engine.host_tier
    assert tier is not None and tier.bytes_per_block == 2048 and tier.capacity_blocks == 2
    engine.prefill_logits(A, namespace="t")
    push_out(engine)
    push_out(engine, seed=300)
    assert len(tier) == 2
    assert tier.stats()["used_bytes"] <= tier.capacity_bytes
    # A's head was dropped from L2 long ago: no reuse, still correct
    _, cached = engine.prefill_logits(A, namespace="t")
    assert cached == 0
    engine.pool.check_integrity()


def test_generate_through_scheduler_uses_l2(tiny_llama: LoadedModel, plain: PrefixEngine) -> None:
    engine = make(tiny_llama, num_blocks=12)
    params = SamplingParams(max_tokens=6, ignore_eos=True)
    system = tokens(24, seed=5)
    first = engine.generate(system + tokens(3, seed=6), params, namespace="g")
    assert first.cached_tokens == 0
    push_out(engine)
    push_out(engine, seed=400)
    prompt = system + tokens(3, seed=7)
    result = engine.generate(prompt, params, namespace="g")
    reference = plain.generate(prompt, params, namespace="g")
    assert result.cached_tokens == 24
    assert result.token_ids == reference.token_ids
    engine.pool.check_integrity()
    assert engine.pool.num_used_blocks == 0


def test_off_by_default_changes_nothing(tiny_llama: LoadedModel) -> None:
    assert EngineConfig().host_tier_bytes == 0
    engine = make(tiny_llama, host_tier_bytes=0)
    assert engine.host_tier is None and engine.blocks.lower_tier is None
    engine.prefill_logits(A, namespace="t")
    push_out(engine)
    _, cached = engine.prefill_logits(A, namespace="t")
    assert cached == 0  # evicted means recomputed, exactly as before
    engine.pool.check_integrity()
    # and with prefix caching off the tier is not built at all
    off = make(tiny_llama, enable_prefix_caching=False)
    assert off.host_tier is None


def test_config_validation(tiny_llama: LoadedModel) -> None:
    for bad in (-1, True, 1.5):
        with pytest.raises(EngineConfigError):
            EngineConfig(host_tier_bytes=bad)  # type: ignore[arg-type]
    with pytest.raises(EngineConfigError, match="smaller than one block"):
        make(tiny_llama, host_tier_bytes=100)


# ---------------------------------------------------------------- HostTier alone


def test_host_tier_lru() -> None:
    shape = (2, 2, 4, 2, 8)
    tier = HostTier(3 * 2 * 2 * 4 * 2 * 8 * 4, shape, torch.float32, pin_memory=False)
    assert tier.capacity_blocks == 3
    blocks = {bytes([i]): torch.full(shape, float(i)) for i in range(1, 6)}
    for key in (b"\x01", b"\x02", b"\x03"):
        tier.put(key, blocks[key])
    got = tier.get(b"\x01")  # 1 becomes MRU, 2 is now LRU
    assert got is not None and torch.equal(got, blocks[b"\x01"])
    tier.put(b"\x04", blocks[b"\x04"])
    assert b"\x02" not in tier and tier.keys() == [b"\x03", b"\x01", b"\x04"]
    assert tier.get(b"\x02") is None
    # the buffer of the dropped entry was reused; stored data is a copy, not a view
    src = blocks[b"\x05"].clone()
    tier.put(b"\x05", src)
    src.zero_()
    dst = torch.zeros(shape)
    assert tier.load(b"\x05", dst) and torch.equal(dst, blocks[b"\x05"])
    assert len(tier) == 3
    stats = tier.stats()
    assert stats["hits"] == 2 and stats["misses"] == 1
    assert stats["bytes_in"] == 5 * tier.bytes_per_block
    assert stats["bytes_out"] == tier.bytes_per_block
    assert stats["num_evictions"] == 2
    assert not tier.load(b"\x09", dst)
    with pytest.raises(ValueError):
        tier.put(b"\x06", torch.zeros(1, 2))
    with pytest.raises(ValueError):
        HostTier(10, shape, torch.float32)


def test_chain_continues_through_a_block_still_in_l1(
    tiny_llama: LoadedModel, plain: PrefixEngine
) -> None:
    """A0 evicted to L2, A1 still in L1 (and not in L2): the chain goes L2 → L1 copy → on."""
    engine = make(tiny_llama)
    tier = engine.host_tier
    assert tier is not None
    engine.prefill_logits(A, namespace="t")
    a_keys = keys_of(engine, A, "t")
    held = [engine.pool.lookup(k) for k in a_keys[1:3]]
    assert None not in held
    engine.pool.pin(held)  # type: ignore[arg-type]
    push_out(engine)
    engine.pool.release(held)  # type: ignore[arg-type]
    assert engine.pool.lookup(a_keys[0]) is None and a_keys[0] in tier
    assert engine.pool.lookup(a_keys[1]) is not None and a_keys[1] not in tier
    logits, cached = engine.prefill_logits(A, namespace="t")
    engine.pool.check_integrity()
    assert cached == 12
    reference, _ = plain.prefill_logits(A, namespace="t")
    torch.testing.assert_close(logits, reference, atol=ATOL, rtol=0)


def test_tier_series_on_the_engine_metrics(tiny_llama: LoadedModel) -> None:
    from prefix.serve.metrics import EngineMetrics

    engine = make(tiny_llama)
    engine.prefill_logits(A, namespace="m")
    push_out(engine)
    engine.prefill_logits(A, namespace="m")  # three blocks back from L2
    text = EngineMetrics(engine).render().decode()
    assert 'prefix_tier_hits_total{tier="l2_host"} 3.0' in text
    assert 'prefix_tier_bytes_out_total{tier="l2_host"}' in text
    assert 'prefix_tier_used_bytes{tier="l2_host"}' in text
    # without a tier there are no tier series at all
    off = EngineMetrics(make(tiny_llama, host_tier_bytes=0)).render().decode()
    assert "prefix_tier_" not in off


def test_buffers_come_from_slabs_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pinned, every block on its own was rounded up to a power of two by PyTorch's host
    allocator (a SmolLM2 block: 1.42x), so the tier could pin up to twice its budget.
    Buffers are views of slabs of at most SLAB_BYTES now: allocations are counted here
    (slab size 4 blocks), blocks stay independent copies, and a discarded block's
    buffer is reused rather than leaked past the budget."""
    import prefix.tiers.host as host

    shape = (2, 2, 4, 2, 8)
    block_bytes = 2 * 2 * 4 * 2 * 8 * 4
    monkeypatch.setattr(host, "SLAB_BYTES", 4 * block_bytes)
    allocations: list[tuple[int, ...]] = []
    empty = torch.empty

    def counted(*args: object, **kwargs: object) -> torch.Tensor:
        out = empty(*args, **kwargs)  # type: ignore[call-overload]
        allocations.append(tuple(out.shape))
        return out

    monkeypatch.setattr(host.torch, "empty", counted)
    tier = HostTier(10 * block_bytes, shape, torch.float32, pin_memory=False)
    allocations.clear()  # the element-size probe of the constructor
    blocks = {bytes([i]): torch.full(shape, float(i)) for i in range(1, 21)}
    for key, block in blocks.items():
        tier.put(key, block)
    assert allocations == [(4, *shape), (4, *shape), (2, *shape)]  # 10 blocks, 3 slabs
    assert tier.stats()["allocated_bytes"] == 10 * block_bytes
    for i in range(11, 21):  # the ten newest, each its own data
        dst = torch.zeros(shape)
        assert tier.load(bytes([i]), dst) and torch.equal(dst, blocks[bytes([i])])
    assert tier.discard(bytes([20]))
    tier.put(bytes([30]), torch.full(shape, 30.0))  # the discarded block's buffer
    assert len(allocations) == 3 and tier.stats()["allocated_bytes"] == 10 * block_bytes
    dst = torch.zeros(shape)
    assert tier.load(bytes([19]), dst) and torch.equal(dst, blocks[bytes([19])])
