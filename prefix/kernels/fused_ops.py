"""Fused element-wise steps of a decoder layer (``elementwise.c``), bf16 on AVX-512.

A decoder layer runs, besides its products and attention, a residual add, two RMSNorms
(each x.float(), the norm, .to(bf16), * weight), a rotary embedding (two muls, a roll,
an add) and SiLU(gate) * up: about 15 separate torch ops, each a pass over memory and,
in a decode step of a few rows, a few microseconds of dispatch. Here they are three
calls per layer (add + RMSNorm twice, RoPE, SiLU * up), rounding to bf16 where the
torch code rounds (so logits match it within the bf16 tolerance the tests use).
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

from prefix.errors import KernelUnavailableError

_P, _I, _F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
_SIGNATURES: dict[str, list[Any]] = {
    # gate_up, stride, out, stride, rows, width, threads
    "cachegate_silu_mul": [_P, _I, _P, _I, _I, _I, ctypes.c_int],
    # x, stride, delta, stride, weight, eps, out, stride, rows, width, threads
    "cachegate_add_rms_norm": [_P, _I, _P, _I, _P, _F, _P, _I, _I, _I, ctypes.c_int],
    # x, stride, cos, sin, table stride, out, stride, rows, heads, head dim, threads
    "cachegate_rope": [_P, _I, _P, _P, _I, _P, _I, _I, ctypes.c_int, ctypes.c_int, ctypes.c_int],
}


def _rows_ok(t: torch.Tensor) -> bool:
    """bf16 on CPU, each row contiguous (any row stride)."""
    return t.device.type == "cpu" and t.dtype == torch.bfloat16 and t.stride(-1) == 1


class FusedOps:
    """The fused steps, bound from the kernels' library (see FlashAttention.load)."""

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        self._fns = {}
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = None
            fn.argtypes = argtypes
            self._fns[name] = fn

    @staticmethod
    def supports(x: torch.Tensor) -> bool:
        """Whether a residual stream ``x`` [T, hidden] can take the fused path."""
        return x.dim() == 2 and x.is_contiguous() and _rows_ok(x) and x.shape[1] % 16 == 0

    def add_rms_norm(
        self, x: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor, eps: float
    ) -> torch.Tensor:
        """``x += delta`` in place (when given), then RMSNorm(x) * weight as a new tensor."""
        rows, width = x.shape
        if not (self.supports(x) and weight.is_contiguous() and _rows_ok(weight)):
            raise KernelUnavailableError("add_rms_norm takes contiguous bf16 rows")
        if delta is not None and (delta.shape != x.shape or not _rows_ok(delta)):
            raise KernelUnavailableError("delta must be bf16 rows of x's shape")
        out = torch.empty_like(x)
        self._fns["cachegate_add_rms_norm"](
            x.data_ptr(),
            x.stride(0),
            delta.data_ptr() if delta is not None else None,
            delta.stride(0) if delta is not None else 0,
            weight.data_ptr(),
            eps,
            out.data_ptr(),
            out.stride(0),
            rows,
            width,
            torch.get_num_threads(),
        )
        return out

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """[T, 2I] (gate then up, rows contiguous) -> SiLU(gate) * up, [T, I]."""
        rows, double = gate_up.shape
        width = double // 2
        if not _rows_ok(gate_up) or double % 32:
            raise KernelUnavailableError("silu_mul takes bf16 rows of a width divisible by 32")
        out = torch.empty((rows, width), dtype=gate_up.dtype)
        self._fns["cachegate_silu_mul"](
            gate_up.data_ptr(),
            gate_up.stride(0),
            out.data_ptr(),
            out.stride(0),
            rows,
            width,
            torch.get_num_threads(),
        )
        return out

    def rope(self, x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
        """x [T, heads, D] (heads packed within a row), cos/sin_signed [T, D] -> [T, heads, D]."""
        rows, heads, head_dim = x.shape
        if not (_rows_ok(x) and x.stride(1) == head_dim and head_dim % 32 == 0):
            raise KernelUnavailableError("rope takes bf16 [T, heads, D] rows, D divisible by 32")
        for table in (cos, sin_signed):
            if not _rows_ok(table) or table.shape != (rows, head_dim):
                raise KernelUnavailableError("cos and sin must be bf16 [T, D] rows")
        if cos.stride(0) != sin_signed.stride(0):
            raise KernelUnavailableError("cos and sin must share one layout")
        out = torch.empty((rows, heads, head_dim), dtype=x.dtype)
        self._fns["cachegate_rope"](
            x.data_ptr(),
            x.stride(0),
            cos.data_ptr(),
            sin_signed.data_ptr(),
            cos.stride(0),
            out.data_ptr(),
            out.stride(0),
            rows,
            heads,
            head_dim,
            torch.get_num_threads(),
        )
        return out
