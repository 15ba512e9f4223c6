"""prefix/model/fused_weights.py: transformers' q/k/v and gate/up ↔ our fused projections."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from prefix.model.config import ModelConfig
from prefix.model.fused_weights import fuse_state, split_state
from prefix.model.llama import LlamaModel

CFG = ModelConfig(
    num_layers=2,
    hidden_size=16,
    intermediate_size=24,
    num_heads=4,
    num_kv_heads=2,
    head_dim=4,
    vocab_size=32,
    rms_norm_eps=1e-6,
    rope_theta=10000.0,
    attention_bias=True,
)


def _hf_state() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    q, kv, h, inter = 16, 8, 16, 24
    shapes = {"q_proj": q, "k_proj": kv, "v_proj": kv}
    state: dict[str, torch.Tensor] = {}
    for i in range(CFG.num_layers):
        for name, rows in shapes.items():
            state[f"layers.{i}.self_attn.{name}.weight"] = torch.randn(rows, h, generator=g)
            state[f"layers.{i}.self_attn.{name}.bias"] = torch.randn(rows, generator=g)
        for name in ("gate_proj", "up_proj"):
            state[f"layers.{i}.mlp.{name}.weight"] = torch.randn(inter, h, generator=g)
        state[f"layers.{i}.mlp.down_proj.weight"] = torch.randn(h, inter, generator=g)
    state["norm.weight"] = torch.ones(h)
    return state


def test_fused_products_equal_the_separate_ones() -> None:
    hf = _hf_state()
    fused = fuse_state(hf, CFG)
    assert "layers.0.self_attn.q_proj.weight" not in fused
    x = torch.randn(5, 16)
    qkv = F.linear(
        x, fused["layers.1.self_attn.qkv_proj.weight"], fused["layers.1.self_attn.qkv_proj.bias"]
    )
    q, k, v = qkv.split([16, 8, 8], dim=-1)
    for name, got in (("q_proj", q), ("k_proj", k), ("v_proj", v)):
        want = F.linear(
            x, hf[f"layers.1.self_attn.{name}.weight"], hf[f"layers.1.self_attn.{name}.bias"]
        )
        torch.testing.assert_close(got, want)
    gate, up = F.linear(x, fused["layers.0.mlp.gate_up_proj.weight"]).chunk(2, dim=-1)
    torch.testing.assert_close(gate, F.linear(x, hf["layers.0.mlp.gate_proj.weight"]))
    torch.testing.assert_close(up, F.linear(x, hf["layers.0.mlp.up_proj.weight"]))
    # untouched names pass through as the same tensors
    assert fused["layers.0.mlp.down_proj.weight"] is hf["layers.0.mlp.down_proj.weight"]


def test_fused_names_are_the_models_and_split_is_the_exact_inverse_as_views() -> None:
    hf = _hf_state()
    fused = fuse_state(hf, CFG)
    model_names = set(LlamaModel(CFG).state_dict())
    # every fused name is one the model has (the norms and o_proj are simply not in _hf_state)
    assert set(fused) <= model_names
    assert {n for n in model_names if "qkv_proj" in n or "gate_up_proj" in n} <= set(fused)
    back = split_state(fused, CFG)
    assert back.keys() == hf.keys()
    for name, tensor in hf.items():
        torch.testing.assert_close(back[name], tensor, rtol=0, atol=0)
    # views: a reference model built from the split state shares our storage
    w = fused["layers.0.self_attn.qkv_proj.weight"]
    assert back["layers.0.self_attn.v_proj.weight"].untyped_storage().data_ptr() == (
        w.untyped_storage().data_ptr()
    )


def test_a_group_missing_a_piece_is_left_for_the_key_check() -> None:
    hf = _hf_state()
    del hf["layers.1.self_attn.k_proj.weight"]
    fused = fuse_state(hf, CFG)
    assert "layers.1.self_attn.qkv_proj.weight" not in fused
    assert "layers.1.self_attn.q_proj.weight" in fused  # reported as unexpected by the loader
    assert "layers.1.self_attn.qkv_proj.bias" in fused  # the biases were complete
