"""The verifier's compute dtype: float32 (default) or bfloat16 matrix products.

``CACHEGATE_VERIFIER_DTYPE=bfloat16`` stores the encoder's linear layers in
bfloat16 and runs their products in bfloat16 (AMX / AVX512-BF16 on CPUs that
have them), while residual sums, LayerNorm and softmax stay float32. Measured
on this CPU (bench/results/verifier_latency_forward.json, one thread, load
1.9-2.8 on 2 cores): a 5-candidate lookup 10.8 -> 5.7 ms per pair, one candidate
12.6 -> 8.9 ms, 32 pairs 12.2 -> 4.5 ms per pair; scores move by at most 0.009
(mean 0.001) over 600 pairs, no decision flipped at the default cut; by 0.027
(mean 0.0007) over the 4,729 calibration scores. bfloat16 has its own calibration
(``verifier_model/calibration_bfloat16.json``, the calibration split scored in
bfloat16), so the cut for a target is read off the scores as served; the
gateway's default ``CACHEGATE_VERIFIER_DTYPE=auto`` picks bfloat16 where the CPU
has AMX (gateway/verifier_choice.py; with AVX512-BF16 alone int8 is faster). The
class default stays float32: the recorded fixtures are float32 scores.

``int8`` runs the English forward through ONNX Runtime with its matrix products in
int8 (validators/onnx_quantize.py: weights per channel in 7 bits, so the same
scores on every x86 CPU), for CPUs without native bfloat16, where float32 costs
~10 ms a pair. Its scores move by 0.012 on average over the calibration split (at
most 0.81 on one pair; 0.023 over BANKING77 pairs), so it has its own calibration
(``calibration_int8.json``) and its own score scale for tenant labels
(gateway/verification.py). The torch module stays float32: it is what the graph is
exported from and checked against. (torch's own dynamic int8 quantization was
measured first and rejected: no faster than bfloat16 in torch, and scores moved by
up to 0.66.)
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

Dtype = Literal["float32", "bfloat16", "int8"]
DTYPES: tuple[Dtype, ...] = ("float32", "bfloat16", "int8")


class BF16Linear(nn.Module):
    """``nn.Linear`` with bfloat16 weights: any input, a bfloat16 product, and a
    float32 output unless ``bf16_out`` (the feed-forward's wide middle, whose only
    reader is the next bfloat16 product: converting 4x-wide activations back and
    forth cost more than the product saved, bench/verifier_latency.py --forward)."""

    def __init__(self, linear: nn.Linear, bf16_out: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(linear.weight.detach().to(torch.bfloat16), requires_grad=False)
        bias = linear.bias
        self.bias = (
            None
            if bias is None
            else nn.Parameter(bias.detach().to(torch.bfloat16), requires_grad=False)
        )
        self.bf16_out = bf16_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.linear(x.to(torch.bfloat16), self.weight, self.bias)
        return y if self.bf16_out else y.to(torch.float32)


def apply_dtype(model: nn.Module, dtype: Dtype) -> nn.Module:
    """``model`` with its linear layers in ``dtype`` (in place; float32 and int8:
    unchanged, int8 being the ONNX graph's business).

    The verifier passes its encoder only: the pooler and the one-row head cost
    nothing per pair and keep their full precision."""
    if dtype not in DTYPES:
        raise ValueError(f"verifier dtype must be one of {DTYPES}, not {dtype!r}")
    if dtype != "bfloat16":
        return model
    for path, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                # BERT's feed-forward middle ("intermediate.dense") feeds only GELU
                # and then the next product, so it stays bfloat16 in between.
                wide = path.endswith("intermediate") and name == "dense"
                setattr(parent, name, BF16Linear(child, bf16_out=wide))
    return model
