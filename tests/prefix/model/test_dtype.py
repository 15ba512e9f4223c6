"""dtype "auto": the resolution rule, its logged reason, and EngineConfig's handling."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from prefix.config import EngineConfig
from prefix.model.dtype import (
    DTYPE_CHOICES,
    cpu_flags,
    dtype_name,
    resolve_dtype,
    validate_dtype_name,
)

NO_BF16 = frozenset({"fpu", "sse2", "avx2", "avx512f"})


def test_explicit_names_pass_through() -> None:
    for name in ("float32", "bfloat16", "float16"):
        dtype, reason = resolve_dtype(name, "cpu")
        assert dtype_name(dtype) == name and "explicitly" in reason


@pytest.mark.parametrize("flag", ["avx512_bf16", "amx_bf16"])
def test_auto_on_a_cpu_with_native_bf16(flag: str) -> None:
    dtype, reason = resolve_dtype("auto", "cpu", flags=NO_BF16 | {flag})
    assert dtype == torch.bfloat16 and flag in reason


def test_auto_on_a_cpu_without_native_bf16_is_float32() -> None:
    # avx512f alone runs bf16 by converting to fp32 around each kernel: slower than fp32
    dtype, reason = resolve_dtype("auto", "cpu", flags=NO_BF16)
    assert dtype == torch.float32 and "emulated" in reason


def test_auto_on_this_machine_matches_its_cpuinfo() -> None:
    dtype, _ = resolve_dtype("auto", "cpu")
    native = bool({"avx512_bf16", "amx_bf16"} & cpu_flags())
    assert dtype == (torch.bfloat16 if native else torch.float32)


def test_cpu_flags_reads_the_flags_line(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx512_bf16 sse2\n")
    assert cpu_flags(info) == {"fpu", "avx512_bf16", "sse2"}
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_unknown_names_are_rejected() -> None:
    assert validate_dtype_name("auto") == "auto" and "auto" in DTYPE_CHOICES
    with pytest.raises(ValueError, match="dtype must be one of"):
        resolve_dtype("float64", "cpu")
    with pytest.raises(ValueError, match="unsupported dtype"):
        dtype_name(torch.float64)


def test_engine_config_defaults_to_auto_and_validates() -> None:
    assert EngineConfig().dtype == "auto"
    with pytest.raises(ValueError, match="dtype"):  # EngineConfigError is a ValueError
        EngineConfig(dtype="fp32")


def test_with_concrete_dtype(caplog: pytest.LogCaptureFixture) -> None:
    explicit = EngineConfig(dtype="float32")
    assert explicit.with_concrete_dtype(torch.bfloat16) is explicit  # explicit wins
    # a model that is already loaded decides: the KV cache must hold what it computes
    assert EngineConfig().with_concrete_dtype(torch.float32).dtype == "float32"
    with caplog.at_level(logging.INFO, logger="cachegate.prefix"):
        resolved = EngineConfig(device="cpu").with_concrete_dtype()
    assert resolved.dtype == dtype_name(resolve_dtype("auto", "cpu")[0])
    assert any("dtype" in r.getMessage() and "auto" in r.getMessage() for r in caplog.records)
