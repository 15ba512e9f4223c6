"""The verifier's compute dtype: float32 (default) or bfloat16 matrix products.

``CACHEGATE_VERIFIER_DTYPE=bfloat16`` stores every linear layer's weight in
bfloat16 and runs its product in bfloat16 (AMX / AVX512-BF16 on CPUs that have
them), while everything between the products (residual sums, LayerNorm,
softmax, the head's sigmoid) stays float32: about half the time of a float32
forward on this CPU, for score differences up to ~0.01
(bench/results/verifier_latency_forward.json). It is opt-in because the
shipped calibration curve, the cut each target misfire rate gives, and the
recorded fixtures were all computed in float32; int8 dynamic quantization was
measured too and rejected (scores moved by up to 0.33).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

Dtype = Literal["float32", "bfloat16"]
DTYPES: tuple[Dtype, ...] = ("float32", "bfloat16")


class BF16Linear(nn.Module):
    """``nn.Linear`` with a bfloat16 weight: float32 in, bfloat16 product, float32 out."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight = nn.Parameter(linear.weight.detach().to(torch.bfloat16), requires_grad=False)
        bias = linear.bias
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.linear(x.to(torch.bfloat16), self.weight).to(torch.float32)
        return y if self.bias is None else y + self.bias  # the bias added in float32


def apply_dtype(model: nn.Module, dtype: Dtype) -> nn.Module:
    """``model`` with its linear layers in ``dtype`` (in place; float32: unchanged).

    The verifier passes its encoder only: the pooler and the one-row head cost
    nothing per pair and keep their full precision."""
    if dtype not in DTYPES:
        raise ValueError(f"verifier dtype must be one of {DTYPES}, not {dtype!r}")
    if dtype == "float32":
        return model
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, BF16Linear(child))
    return model
