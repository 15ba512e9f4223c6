"""Our fused projections ↔ transformers' separate ones, by state-dict name.

The decoder runs q/k/v as one ``qkv_proj`` and gate/up as one ``gate_up_proj``
(as vLLM's QKVParallelLinear and MergedColumnParallelLinear do): one matrix
product where there were three and two, so a decode step makes 4 linear calls
per layer instead of 7 and each product is wider. transformers names the
pieces separately, so weights cross the boundary here: :func:`fuse_state`
concatenates a transformers state dict's pieces along the output rows, and
:func:`split_state` hands a fused state dict back as row slices (views: no
copy, so a reference model built from them shares our tensors).
"""

from __future__ import annotations

import torch

from prefix.model.config import ModelConfig

# fused module -> its pieces in output-row order
_GROUPS = {
    "self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj"),
}


def _rows(config: ModelConfig, fused: str) -> list[int]:
    if fused == "self_attn.qkv_proj":
        kv_dim = config.num_kv_heads * config.head_dim
        return [config.num_heads * config.head_dim, kv_dim, kv_dim]
    return [config.intermediate_size, config.intermediate_size]


def fuse_state(state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """``layers.{i}.self_attn.q_proj.weight`` … → ``layers.{i}.self_attn.qkv_proj.weight``.

    Keys of other names pass through; a group missing a piece is left as it is,
    so the caller's missing/unexpected-key check names what is wrong.
    """
    out = dict(state)
    for i in range(config.num_layers):
        for fused, pieces in _GROUPS.items():
            for kind in ("weight", "bias"):
                names = [f"layers.{i}.{p}.{kind}" for p in pieces]
                if all(n in out for n in names):
                    # pieces are [rows_j, in] (or [rows_j]) -> [sum rows_j, in]
                    out[f"layers.{i}.{fused}.{kind}"] = torch.cat([out.pop(n) for n in names])
    return out


def split_state(state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """The inverse of :func:`fuse_state`, as views of the fused tensors."""
    out = dict(state)
    for i in range(config.num_layers):
        for fused, pieces in _GROUPS.items():
            for kind in ("weight", "bias"):
                name = f"layers.{i}.{fused}.{kind}"
                if name in out:
                    parts = out.pop(name).split(_rows(config, fused))  # dim 0: output rows
                    for piece, part in zip(pieces, parts, strict=True):
                        out[f"layers.{i}.{piece}.{kind}"] = part
    return out
