"""Linear layers prepacked for oneDNN, with the products that share an input fused.

On a CPU that computes bf16 natively (AMX / AVX512-BF16), ``F.linear`` on a plain
``[out, in]`` bf16 weight goes through oneDNN with the weight in its plain layout on
every call; for the small products of a decode step (one to a few dozen rows
against a 576x576 matrix) the call's setup costs more than the arithmetic. Packing
each weight once at load (``_reorder_linear_weight``) and fusing the products that
read the same input (q/k/v into one, gate/up into one, as vLLM's QKVParallelLinear
and MergedColumnParallelLinear do) halves the number of calls. Measured on a
Sapphire Rapids VM (bench/packed_linears.py, plain / packed in one run): a step's
linear layers 1.41x faster at 1 row, 1.44x at 8, 1.19x at 32, 1.11x at 2,048; whole
decode steps 1.22-1.27x at batch 1, 1.08-1.15x at batch 8, equal at batch 32 and
for a 2,048-token prefill. In float32 it is mixed (0.86x at 1 row, 1.35x at 8,
0.97x at 2,048), so the engine packs bf16 on CPU only.

Numerics: each output column of a product depends only on its own weight row, so
fusing changes no formula; a spot check of one packed product against ``F.linear``
matched bit for bit at 1 to 2,200 rows. Whole-model logits of SmolLM2 packed vs
plain still differ by up to ~3.5 bf16 steps (plain ``F.linear`` picks other kernels
for some shapes, and bf16 rounding compounds through the layers), so the tests hold
the packed model to the same bf16 tolerance as every other path: cached-prefix
suffix = full forward, batched decode = each sequence alone, packed = plain.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

# rows the packed layout is tuned for; any row count works with it (decode steps are
# 1..max_num_seqs rows, prefill chunks thousands)
BATCH_HINT = 32


def can_pack(dtype: torch.dtype, device: torch.device | str) -> bool:
    """Whether packing pays here: bf16 on a CPU whose PyTorch has oneDNN and whose
    oneDNN can lay bf16 weights out (:func:`_can_reorder_bf16`)."""
    return (
        torch.device(device).type == "cpu"
        and dtype == torch.bfloat16
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and _can_reorder_bf16()
    )


@functools.cache
def _can_reorder_bf16() -> bool:
    """oneDNN's bf16 reorder needs AVX512 (bw, vl, dq) or AVX-NE-CONVERT; on a CPU with
    AVX2 alone (an EPYC of the Zen 2/3 kind) it raises. Asked of oneDNN itself, once,
    on a tiny weight, rather than guessed from CPU flags."""
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(8, 8, dtype=torch.bfloat16), 1)
    except RuntimeError:
        return False
    return True


class PackedLinear(nn.Module):
    """One oneDNN product standing for ``linears`` side by side (outputs concatenated).

    ``split_sizes`` are the output widths of the original layers, in order, so
    ``out.split(split_sizes, -1)`` recovers each one's output.
    """

    def __init__(self, linears: Sequence[nn.Linear]) -> None:
        super().__init__()
        if not linears:
            raise ValueError("PackedLinear needs at least one linear layer")
        in_features = {lin.in_features for lin in linears}
        if len(in_features) != 1:
            raise ValueError(f"fused layers must share their input width, got {in_features}")
        self.in_features = in_features.pop()
        self.split_sizes = [lin.out_features for lin in linears]
        self.out_features = sum(self.split_sizes)
        weight = torch.cat([lin.weight.detach() for lin in linears])  # [sum(out), in]
        self.dtype = weight.dtype
        # a oneDNN-layout tensor, not a Parameter: nothing trains it, and state_dict()
        # could not serialize it anyway
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, BATCH_HINT)
        bias: torch.Tensor | None = None
        if any(lin.bias is not None for lin in linears):
            # a layer without a bias fused with one that has it adds zeros
            bias = torch.cat(
                [
                    lin.bias.detach()
                    if lin.bias is not None
                    else torch.zeros(lin.out_features, dtype=weight.dtype)
                    for lin in linears
                ]
            )
        self.bias = bias

    def __deepcopy__(self, memo: dict[int, Any]) -> PackedLinear:
        # a oneDNN-layout tensor has no storage to copy; it is never written after
        # packing, so copies of the model share it
        new = self.__class__.__new__(self.__class__)
        state = {k: v for k, v in self.__dict__.items() if k != "packed"}
        new.__dict__.update(copy.deepcopy(state, memo))
        new.packed = self.packed
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] -> [..., sum(out)]."""
        if x.dtype != self.dtype:
            # model.to(other dtype) cannot convert a packed weight
            raise RuntimeError(f"packed {self.dtype} linear called with {x.dtype} input")
        lead = x.shape[:-1]
        # [..., in] -> [N, in]: the oneDNN op takes a contiguous 2-D input
        rows = x.reshape(-1, self.in_features).contiguous()
        out = torch.ops.mkldnn._linear_pointwise(rows, self.packed, self.bias, "none", [], "")
        # [N, sum(out)] -> [..., sum(out)]
        return out.view(*lead, self.out_features)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.split_sizes}, bias={self.bias is not None}"


def reference_linear(x: torch.Tensor, linears: Sequence[nn.Linear]) -> torch.Tensor:
    """What a ``PackedLinear`` of ``linears`` computes, with plain ``F.linear`` (tests)."""
    return torch.cat([F.linear(x, lin.weight, lin.bias) for lin in linears], dim=-1)
