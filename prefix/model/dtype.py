"""Which floating-point dtype the engine computes in.

``"auto"`` picks bfloat16 where the hardware computes it natively and float32
elsewhere. On CPUs without native bf16 instructions PyTorch emulates bf16 by
converting to float32 around every kernel, which is slower than plain float32;
with AVX512-BF16 or AMX the matmuls run in bf16 directly and every weight and
KV byte read is halved, which is what decode speed is bound by.

The decision is made once at engine start and logged with its reason, so a
deployment can tell from its log why it runs in the dtype it does.
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
DTYPE_CHOICES: tuple[str, ...] = ("auto", *DTYPES)

# x86 flags (as /proc/cpuinfo spells them) that mean bf16 dot products run in hardware
_CPU_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"`` (the names configs and fingerprints use)."""
    for name, value in DTYPES.items():
        if value == dtype:
            return name
    raise ValueError(f"unsupported dtype {dtype}; choose one of {sorted(DTYPES)}")


def validate_dtype_name(name: str) -> str:
    """Return ``name`` if it is ``"auto"`` or a supported dtype, else raise ValueError."""
    if name not in DTYPE_CHOICES:
        raise ValueError(f"dtype must be one of {DTYPE_CHOICES}, got {name!r}")
    return name


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU feature flags of the first processor entry (empty where unreadable)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:  # not Linux, or /proc not mounted: no evidence of native bf16
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_bf16_reason(flags: frozenset[str] | None = None) -> str | None:
    """Why this CPU computes bf16 natively, or None when it does not."""
    flags = cpu_flags() if flags is None else flags
    found = [f for f in _CPU_BF16_FLAGS if f in flags]
    if not found:
        return None
    return f"CPU ({platform.machine()}) has {' and '.join(found)}"


def resolve_dtype(
    name: str, device: torch.device | str, flags: frozenset[str] | None = None
) -> tuple[torch.dtype, str]:
    """``name`` ("auto" or a dtype name) on ``device`` -> (torch dtype, the reason).

    ``flags`` overrides the CPU flags read from /proc/cpuinfo (for tests).
    """
    validate_dtype_name(name)
    if name != "auto":
        return DTYPES[name], f"dtype={name} was set explicitly"
    dev = torch.device(device)
    if dev.type == "cuda":
        if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return torch.bfloat16, f"auto: {torch.cuda.get_device_name(dev)} supports bf16"
        return torch.float32, "auto: this CUDA device has no native bf16"
    if dev.type == "cpu":
        reason = cpu_bf16_reason(flags)
        if reason is not None:
            return torch.bfloat16, f"auto: {reason}"
        return torch.float32, "auto: CPU has neither avx512_bf16 nor amx_bf16 (bf16 is emulated)"
    return torch.float32, f"auto: no native-bf16 check for device type {dev.type!r}"
