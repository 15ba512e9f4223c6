"""The ``auto`` rules of gateway/verifier_choice.py.

``CACHEGATE_VERIFIER_DTYPE`` (English): bfloat16 where the CPU has AMX, else int8
where ONNX Runtime's int8 kernels run (AVX2, VNNI, AMX) and ONNX Runtime runs the
verifier, else bfloat16 where it is native, else float32; an explicit value wins (the
rest of its tests, through ``load_verifier``, are in test_verification_dtype.py).

``CACHEGATE_VERIFIER_ZH_PRECISION``: ``auto`` runs the Chinese verifier in int8
where the CPU has ONNX Runtime's u8s8 kernels (AVX2, VNNI, AMX) and ONNX Runtime runs
the verifier, in float32 elsewhere; an explicit value wins; the choice reaches the
verifier and is logged. CPU flags are faked as in test_verification_dtype."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from gateway.settings import Settings, get_settings
from gateway.verification import load_verifier
from gateway.verifier_choice import int8_fallback, resolve_dtype, resolve_zh_precision

PLAIN = frozenset({"fpu", "sse2", "avx2", "avx512f"})
#: an x86 CPU before AVX2, or what an ARM CPU's flags look like to this check
NO_INT8 = frozenset({"fpu", "sse2", "sse4_2", "asimd"})


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    get_settings.cache_clear()
    for name in ("VERIFIER_ZH_PRECISION", "VERIFIER_BACKEND", "VERIFIER_DTYPE"):
        monkeypatch.delenv(f"CACHEGATE_{name}", raising=False)
    monkeypatch.setenv("CACHEGATE_VERIFIER_CACHE_SIZE", "0")
    yield monkeypatch
    get_settings.cache_clear()


@pytest.mark.parametrize("flag", ["avx512_vnni", "avx_vnni", "amx_int8", "avx2"])
def test_auto_is_int8_on_a_cpu_with_int8_kernels(flag: str) -> None:
    precision, why = resolve_zh_precision("auto", "auto", NO_INT8 | {flag})
    assert precision == "int8" and flag in why


def test_auto_is_float32_without_them_or_without_onnx_runtime() -> None:
    assert resolve_zh_precision("auto", "auto", NO_INT8)[0] == "float32"
    assert resolve_zh_precision("auto", "torch", PLAIN | {"avx512_vnni"})[0] == "float32"
    assert resolve_zh_precision("auto", "onnx", PLAIN | {"avx512_vnni"})[0] == "int8"


def test_an_explicit_setting_wins_over_the_cpu() -> None:
    assert resolve_zh_precision("float32", "auto", PLAIN | {"amx_int8"}) == ("float32", "set")
    assert resolve_zh_precision("int8", "auto", NO_INT8) == ("int8", "set")


@pytest.mark.parametrize("flag", ["avx512_bf16", "amx_bf16"])
def test_english_auto_is_bfloat16_where_the_cpu_computes_it(flag: str) -> None:
    amx = PLAIN | {"amx_bf16", "amx_int8", flag}
    dtype, why = resolve_dtype("auto", "auto", amx)
    assert dtype == "bfloat16" and flag in why
    # bfloat16 runs in torch, so even the torch backend keeps it; the onnx backend
    # (which refuses to fall back to torch) gets int8 instead.
    assert resolve_dtype("auto", "torch", PLAIN | {flag})[0] == "bfloat16"
    dtype, why = resolve_dtype("auto", "onnx", PLAIN | {flag})
    assert dtype == "int8" and "onnx backend" in why


def test_english_auto_prefers_int8_to_bfloat16_without_amx() -> None:
    # AMD Zen 4 (AVX512-BF16 and VNNI, no AMX): 3.88 against 7.37 ms a pair.
    zen4 = PLAIN | {"avx512_bf16", "avx512_vnni"}
    dtype, why = resolve_dtype("auto", "auto", zen4)
    assert dtype == "int8" and "no AMX" in why and "avx512_vnni" in why
    # Controls: AMX keeps bfloat16; without int8 kernels or under the torch backend
    # (int8 runs in ONNX Runtime only) native bfloat16 still beats float32.
    assert resolve_dtype("auto", "auto", zen4 | {"amx_bf16"})[0] == "bfloat16"
    dtype, why = resolve_dtype("auto", "auto", NO_INT8 | {"avx512_bf16"})
    assert dtype == "bfloat16" and "not int8" in why
    assert resolve_dtype("auto", "torch", zen4)[0] == "bfloat16"


@pytest.mark.parametrize("flag", ["avx512_vnni", "avx_vnni", "amx_int8", "avx2"])
def test_english_auto_is_int8_with_int8_kernels_and_no_native_bfloat16(flag: str) -> None:
    dtype, why = resolve_dtype("auto", "auto", NO_INT8 | {flag})
    assert dtype == "int8" and flag in why and "bfloat16" in why
    assert resolve_dtype("auto", "onnx", NO_INT8 | {flag})[0] == "int8"


def test_english_auto_is_float32_without_int8_kernels_or_onnx_runtime() -> None:
    dtype, why = resolve_dtype("auto", "auto", NO_INT8)
    assert dtype == "float32" and "emulated" in why
    dtype, why = resolve_dtype("auto", "torch", PLAIN)  # AVX2, but the torch backend
    assert dtype == "float32" and "ONNX Runtime" in why


def test_english_auto_is_float32_without_an_int8_calibration_of_these_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import validators.verifier
    from validators.verifier_calibration import CALIBRATION_FILES

    shipped = validators.verifier.MODEL_DIR
    for path in shipped.iterdir():
        if path.name != CALIBRATION_FILES["int8"]:
            (tmp_path / path.name).symlink_to(path)
    monkeypatch.setattr(validators.verifier, "MODEL_DIR", tmp_path)
    dtype, why = resolve_dtype("auto", "auto", PLAIN)
    assert dtype == "float32" and "no int8 calibration" in why
    # With native bfloat16 (no AMX) the missing int8 calibration leaves bfloat16.
    dtype, why = resolve_dtype("auto", "auto", PLAIN | {"avx512_bf16"})
    assert dtype == "bfloat16" and "no int8 calibration" in why
    stale = json.loads((shipped / CALIBRATION_FILES["int8"]).read_text())
    stale["weights_sha256"] = "0" * 64
    (tmp_path / CALIBRATION_FILES["int8"]).write_text(json.dumps(stale))
    assert resolve_dtype("auto", "auto", PLAIN)[0] == "float32"
    # Positive control: the shipped file in the same copy.
    (tmp_path / CALIBRATION_FILES["int8"]).unlink()
    (tmp_path / CALIBRATION_FILES["int8"]).symlink_to(shipped / CALIBRATION_FILES["int8"])
    assert resolve_dtype("auto", "auto", PLAIN)[0] == "int8"


def test_a_failed_int8_graph_falls_back_to_native_bfloat16_else_float32() -> None:
    assert int8_fallback("auto", PLAIN | {"avx512_bf16", "avx512_vnni"}) == "bfloat16"
    assert int8_fallback("torch", PLAIN | {"avx512_bf16"}) == "bfloat16"
    assert int8_fallback("auto", PLAIN | {"avx512_vnni"}) == "float32"  # no native bf16
    assert int8_fallback("onnx", PLAIN | {"avx512_bf16"}) == "float32"  # bf16 is torch's


def test_an_explicit_english_dtype_wins_over_the_cpu() -> None:
    assert resolve_dtype("float32", "auto", PLAIN | {"amx_bf16"}) == ("float32", "set")
    assert resolve_dtype("int8", "auto", NO_INT8) == ("int8", "set")
    assert resolve_dtype("bfloat16", "auto", NO_INT8) == ("bfloat16", "set")


def test_the_setting_is_validated() -> None:
    assert Settings.model_fields["verifier_zh_precision"].default == "auto"
    with pytest.raises(ValidationError):
        Settings(verifier_zh_precision="int4")


@pytest.mark.slow
def test_the_choice_reaches_the_verifier_and_is_logged(
    settings_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import prefix.model.dtype

    settings_env.setattr(prefix.model.dtype, "cpu_flags", lambda *a, **k: PLAIN | {"amx_int8"})
    with caplog.at_level(logging.INFO, logger="cachegate.gateway.verification"):
        v = load_verifier()
    assert v.model.zh_precision == "int8"
    assert any("Chinese pairs in int8" in r.getMessage() for r in caplog.records)
    get_settings.cache_clear()
    settings_env.setenv("CACHEGATE_VERIFIER_ZH_PRECISION", "float32")
    f32 = load_verifier()
    assert f32.model.zh_precision == "float32"
    # The Chinese int8 graph's scores are mapped onto the common scale: its labels keep
    # the float32 id (English int8 is a scale of its own: test_verification_dtype).
    assert f32.zh_scale_id == v.zh_scale_id and f32.scale_ids == v.scale_ids
