"""``CACHEGATE_VERIFIER_ZH_PRECISION`` (gateway/verification.py): ``auto`` runs the
Chinese verifier in int8 where the CPU has ONNX Runtime's u8s8 kernels (AVX2, VNNI,
AMX) and ONNX Runtime runs the verifier, in float32 elsewhere; an explicit value wins; the choice
reaches the verifier and is logged. CPU flags are faked as in test_verification_dtype."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from gateway.settings import Settings, get_settings
from gateway.verification import load_verifier, resolve_zh_precision

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
    assert load_verifier().model.zh_precision == "float32"
