"""How the verifier's weights are stored: int8 matrices with one scale per row.

The fine-tuned MiniLM cross-encoder has 22.7M parameters; as float16 that is
45 MB, over the size the repository ships. Every matrix (embeddings, attention
and feed-forward weights, the head) is stored as int8 with a float16 scale per
output row (symmetric, ``w ≈ q * scale``); vectors (biases, LayerNorm) stay
float16. That is ~23 MB, and the round trip moves the pair scores by far less
than the calibration's resolution (the recorded fixtures are computed *after*
the round trip, so what the tests compare is exactly what ships).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

_Q = "::q"
_S = "::scale"
# Rows shorter than this are not worth quantizing (and the head's single row
# keeps its full float16 precision).
_MIN_NUMEL = 4096


def quantize(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, t in state.items():
        t = t.detach().to(torch.float32).cpu()
        if t.dim() == 2 and t.numel() >= _MIN_NUMEL:
            # (rows, cols) -> one scale per row: (rows, 1)
            scale = t.abs().amax(dim=1, keepdim=True).clamp_min(1e-8) / 127.0
            out[name + _Q] = torch.round(t / scale).clamp(-127, 127).to(torch.int8).contiguous()
            out[name + _S] = scale.to(torch.float16).contiguous()
        elif t.is_floating_point():
            out[name] = t.to(torch.float16).contiguous()
        else:
            out[name] = t.contiguous()
    return out


def dequantize(stored: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, t in stored.items():
        if name.endswith(_S):
            continue
        if name.endswith(_Q):
            base = name[: -len(_Q)]
            out[base] = t.to(torch.float32) * stored[base + _S].to(torch.float32)
        elif t.is_floating_point():
            out[name] = t.to(torch.float32)
        else:
            out[name] = t
    return out


def save(state: dict[str, torch.Tensor], path: Path) -> str:
    """Write the quantized weights; returns the file's SHA-256 (hex)."""
    save_file(quantize(state), str(path))
    return sha256(path)


def load(path: Path) -> dict[str, torch.Tensor]:
    return dequantize(load_file(str(path)))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
