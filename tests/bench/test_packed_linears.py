"""bench/packed_linears.py's pieces on a tiny bf16 model: both copies run the same
products, the packed one through PackedLinear, and the rows report plain / packed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.decode_speed import DecodeState
from bench.packed_linears import alternate, decode_steps, force_pack, linear_calls, row
from prefix.model.llama import DecoderLayer
from prefix.model.loader import load_model
from prefix.model.packed_linear import PackedLinear, can_pack
from tests.prefix.tiny_models import save_tiny_model


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="needs oneDNN")
@pytest.mark.parametrize(
    "dtype",
    [
        pytest.param(
            torch.bfloat16,
            marks=pytest.mark.skipif(
                not can_pack(torch.bfloat16, "cpu"), reason="oneDNN cannot pack bf16 on this CPU"
            ),
        ),
        torch.float32,
    ],
)
def test_bench_pieces_run_plain_and_packed(tmp_path: Path, dtype: torch.dtype) -> None:
    save_tiny_model(tmp_path / "m", "qwen2")
    plain, packed = (
        load_model(
            str(tmp_path / "m"),
            device="cpu",
            dtype=dtype,
            verbose=False,
            cache_dir=tmp_path / "cache",
        )
        for _ in range(2)
    )
    force_pack(packed.model)  # float32 too: the bench measures what packing would give
    assert isinstance(packed.model.lm_head_packed, PackedLinear)
    first = packed.model.layers[0]
    assert isinstance(first, DecoderLayer) and first.self_attn.q_proj is None
    fns = {"plain": linear_calls(plain.model, 3), "packed": linear_calls(packed.model, 3)}
    times = alternate(fns, 2)
    assert [len(v) for v in times.values()] == [2, 2]  # the warm-up round is dropped
    states = {k: DecodeState(m, 2, 20, 4) for k, m in (("plain", plain), ("packed", packed))}
    steps = {k: decode_steps(states[k], m.model) for k, m in (("plain", plain), ("packed", packed))}
    out = row("decode", "batch 2", alternate(steps, 2), 2)
    assert out["speedup"] == pytest.approx(out["plain_ms"] / out["packed_ms"], rel=0.05)
    assert out["plain_tokens_per_s"] > 0 and out["packed_tokens_per_s"] > 0
