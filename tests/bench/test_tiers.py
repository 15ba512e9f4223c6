"""bench/tiers.py's eviction step: ``drop_l1`` must push every cached block out of the
pool through the eviction hook (into L2), or the L2/L3 cases would measure L1 hits."""

from __future__ import annotations

import torch

from bench.tiers import drop_l1
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine


def test_drop_l1_moves_every_cached_block_to_l2(tiny_llama: LoadedModel) -> None:
    engine = PrefixEngine(
        EngineConfig(block_size=4, num_blocks=16, host_tier_bytes=1 << 20), loaded=tiny_llama
    )
    prompt = torch.arange(3, 16).tolist()  # 13 tokens: 3 reusable blocks
    assert engine.prefill_logits(prompt, namespace="t")[1] == 0
    assert engine.pool.num_cached_blocks >= 3
    drop_l1(engine)
    engine.pool.check_integrity()
    assert engine.pool.num_cached_blocks == 0 and engine.pool.num_used_blocks == 0
    assert engine.host_tier is not None and len(engine.host_tier) >= 3
    hits = engine.host_tier.hits
    assert engine.prefill_logits(prompt, namespace="t")[1] == 12  # all from L2
    assert engine.host_tier.hits - hits == 3
