"""The engine on CUDA: suffix-only prefill over paged blocks equals a full forward there too.

Skipped without a CUDA device (the ``gpu`` marker); run on a machine with one.
"""

from __future__ import annotations

import pytest
import torch

from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel, load_model
from prefix.serve.engine import PrefixEngine

pytestmark = pytest.mark.gpu


def test_cached_prefix_logits_equal_full_forward_on_cuda(tiny_llama: LoadedModel) -> None:
    loaded = load_model(tiny_llama.path, device="cuda", verbose=False)
    assert loaded.model.device.type == "cuda"
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=64), loaded=loaded)
    plain = PrefixEngine(
        EngineConfig(block_size=4, num_blocks=64, enable_prefix_caching=False), loaded=loaded
    )
    gen = torch.Generator().manual_seed(0)
    first = torch.randint(3, 128, (23,), generator=gen).tolist()
    second = first[:17] + torch.randint(3, 128, (6,), generator=gen).tolist()
    engine.prefill_logits(first, namespace="g")
    logits, cached = engine.prefill_logits(second, namespace="g")
    assert cached == 16
    torch.testing.assert_close(logits, plain.prefill_logits(second)[0], atol=1e-4, rtol=0)
    assert engine.kv_cache.kv.device.type == "cuda"
    engine.pool.check_integrity()
