"""Rotary position embeddings: the inverse frequencies (plain, linear and llama3
scaling, as transformers computes them), per-position cos/sin tables, and the rotation.

The tables are built once per forward and shared by every layer; the rotation is
transformers' rotate-half form with the sign folded into the sin table.
"""

from __future__ import annotations

import math

import torch

from prefix.model.config import ModelConfig


def rope_inv_freq(config: ModelConfig) -> torch.Tensor:
    """[head_dim/2] float32 inverse frequencies, same formulas as transformers."""
    dim = config.head_dim
    # explicit device: the loader builds the model under torch.device("meta")
    exponents = torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim
    inv_freq = 1.0 / (config.rope_theta**exponents)
    scaling = config.rope_scaling_dict() or {}
    rope_type = config.rope_type
    if rope_type == "linear":
        inv_freq = inv_freq / float(scaling["factor"])
    elif rope_type == "llama3":
        factor = float(scaling["factor"])
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        old_ctx = float(scaling["original_max_position_embeddings"])
        low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
        wavelen = 2 * math.pi / inv_freq
        # long wavelengths are stretched by `factor`, short ones kept, the band between blended
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_ctx / wavelen - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        is_medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv_freq = torch.where(is_medium, blended, scaled)
    return inv_freq


class RotaryEmbedding:
    """cos/sin tables for given absolute positions; inv_freq stays float32 on purpose.

    Not an nn.Module buffer: ``model.to(bfloat16)`` would round inv_freq and shift
    every angle, and K written by one dtype must match what the reference computes.
    """

    def __init__(self, config: ModelConfig) -> None:
        self.inv_freq = rope_inv_freq(config)
        self._by_device: dict[torch.device, torch.Tensor] = {}

    def __call__(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, signed sin), each [T, D]: the sin of the first half negated (apply_rope)."""
        inv_freq = self._by_device.get(positions.device)
        if inv_freq is None:
            inv_freq = self._by_device.setdefault(
                positions.device, self.inv_freq.to(positions.device)
            )
        # [T, 1] * [D/2] -> [T, D/2]
        freqs = positions[:, None].float() * inv_freq
        # [T, D/2] -> [T, D]: rotate-half layout pairs dim i with dim i + D/2
        emb = torch.cat((freqs, freqs), dim=-1)
        sin = emb.sin()
        sin[:, : freqs.shape[-1]].neg_()
        return emb.cos().to(dtype), sin.to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """x [T, H, D], cos/sin_signed [T, D] -> [T, H, D].

    transformers' ``x * cos + rotate_half(x) * sin`` with rotate_half(x) = [-x2, x1]:
    the sign moved into the table (negating is exact in any dtype) and the halves
    swapped by one ``roll``, so the result is bit-identical in 3 ops instead of 6.
    """
    # [T, D] -> [T, 1, D] to broadcast over heads
    return x * cos[:, None] + x.roll(x.shape[-1] // 2, dims=-1) * sin_signed[:, None]
