"""``CACHEGATE_VERIFIER_DTYPE`` (gateway/verification.py ``load_verifier``): the
default ``auto`` resolves (gateway/verifier_choice.py) to bfloat16 on a CPU with
AMX, to int8 where ONNX Runtime's int8 kernels run (AVX2, VNNI, AMX; AVX512-BF16
without AMX included, where int8 is faster), to bfloat16 where it is native and int8
cannot run, and to float32 elsewhere; an explicit dtype wins over
the CPU; the choice is logged with its reason; the verifier reads the calibration of
the dtype it runs in. The CPU's flags are faked where the rule is tested, as
tests/prefix/model/test_dtype.py passes them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import numpy as np
import pytest
from pydantic import ValidationError

from gateway.settings import Settings, get_settings
from gateway.verification import load_verifier
from validators.verifier import CALIBRATION_FILES, MODEL_DIR
from validators.verifier_calibration import _cut

pytestmark = pytest.mark.slow

NO_BF16 = frozenset({"fpu", "sse2", "avx2", "avx512f"})
#: neither native bf16 nor int8 kernels (an x86 CPU before AVX2)
NEITHER = frozenset({"fpu", "sse2", "sse4_2"})


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Settings read afresh; no verifier dtype in the environment; no verdict cache."""
    get_settings.cache_clear()
    monkeypatch.delenv("CACHEGATE_VERIFIER_DTYPE", raising=False)
    monkeypatch.setenv("CACHEGATE_VERIFIER_CACHE_SIZE", "0")
    yield monkeypatch
    get_settings.cache_clear()


def fake_cpu(monkeypatch: pytest.MonkeyPatch, flags: frozenset[str]) -> None:
    import prefix.model.dtype

    monkeypatch.setattr(prefix.model.dtype, "cpu_flags", lambda *a, **k: flags)


def test_auto_is_the_default_and_the_only_other_values_are_dtypes() -> None:
    assert Settings.model_fields["verifier_dtype"].default == "auto"
    for name in ("auto", "float32", "bfloat16", "int8"):
        assert Settings(verifier_dtype=name).verifier_dtype == name
    for bad in ("float16", "int4", "bf16"):
        with pytest.raises(ValidationError):
            Settings(verifier_dtype=bad)


def chosen_line(caplog: pytest.LogCaptureFixture) -> str:
    lines = [
        r.getMessage() for r in caplog.records if "pair verifier computes in" in r.getMessage()
    ]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (NO_BF16 | {"amx_bf16", "avx512_bf16", "amx_int8"}, "amx_bf16"),  # Sapphire Rapids
        # native bfloat16 where no int8 kernel runs: still faster than float32
        (NEITHER | {"avx512_bf16"}, "avx512_bf16"),
    ],
)
def test_auto_is_bfloat16_with_amx_or_where_int8_cannot_run(
    settings_env: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    flags: frozenset[str],
    why: str,
) -> None:
    fake_cpu(settings_env, flags)
    with caplog.at_level(logging.INFO, logger="cachegate.gateway.verification"):
        v = load_verifier()
    assert v.model.dtype == "bfloat16" and v.model.calibration_dtype == "bfloat16"
    line = chosen_line(caplog)
    assert "bfloat16" in line and why in line, line


def test_auto_with_avx512_bf16_but_no_amx_is_int8(
    settings_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # AMD Zen 4: native bfloat16, but int8 on VNNI measured 1.6-1.9x as fast a pair.
    fake_cpu(settings_env, NO_BF16 | {"avx512_bf16", "avx512_vnni"})
    with caplog.at_level(logging.INFO, logger="cachegate.gateway.verification"):
        v = load_verifier()
    assert v.model.dtype == "int8" and v.model.calibration_dtype == "int8"
    assert v.model.backend == "onnx"
    line = chosen_line(caplog)
    assert "no AMX" in line and "avx512_vnni" in line, line


def test_auto_on_a_cpu_without_native_bf16_is_int8_with_its_own_calibration(
    settings_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake_cpu(settings_env, NO_BF16)
    with caplog.at_level(logging.INFO, logger="cachegate.gateway.verification"):
        v = load_verifier()
    assert v.model.dtype == "int8" and v.model.calibration_dtype == "int8"
    assert v.model.backend == "onnx"
    assert any("int8 through onnx" in r.getMessage() for r in caplog.records)
    # int8 scores are a scale of their own for tenant labels; bfloat16's are float32's.
    f32, b16 = load_verifier(dtype="float32"), load_verifier(dtype="bfloat16")
    assert v.en_scale_id != f32.en_scale_id and b16.en_scale_id == f32.en_scale_id
    # Chinese scores do not depend on the English dtype: their labels keep counting.
    assert v.zh_scale_id == f32.zh_scale_id == b16.zh_scale_id
    # The id samples were stored under before session 35 had the int8 part too.
    import hashlib

    from validators.onnx_forward import INT8_SESSION_VERSION

    assert v.model.zh_path is not None
    en, zh = v.model.meta["weights_sha256"], v.model.zh_path.weights_sha256
    old = f"{en}:int8.{INT8_SESSION_VERSION}:{zh}"
    assert v.legacy_scale_id == hashlib.sha256(old.encode()).hexdigest()[:16]
    assert v.legacy_scale_id != f32.legacy_scale_id
    # Another int8 graph (session 31 skipped a fusion that moved its scores) is another
    # scale; the same one keeps its id.
    import validators.onnx_forward

    assert type(v)(v.model).en_scale_id == v.en_scale_id
    settings_env.setattr(validators.onnx_forward, "INT8_SESSION_VERSION", 1)
    assert type(v)(v.model).en_scale_id != v.en_scale_id
    # Control: the version is int8's alone; float32 and bfloat16 labels keep counting.
    assert type(f32)(f32.model).en_scale_id == f32.en_scale_id
    assert type(b16)(b16.model).en_scale_id == b16.en_scale_id


def test_when_autos_int8_graph_fails_float32_serves_and_an_explicit_int8_refuses(
    settings_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import validators.onnx_forward
    from validators.verifier_errors import VerifierModelError

    def broken(model: bytes) -> bytes:
        raise OSError("read-only file system")  # the quantizer writes temporary files

    fake_cpu(settings_env, NO_BF16)
    settings_env.setattr(validators.onnx_forward, "quantize_int8", broken)
    with caplog.at_level(logging.INFO, logger="cachegate.gateway.verification"):
        v = load_verifier()
    assert v.model.dtype == "float32" and v.model.calibration_dtype == "float32"
    assert any("int8 graph failed" in r.getMessage() for r in caplog.records)
    assert v.scale_ids == load_verifier(dtype="float32").scale_ids
    with pytest.raises(VerifierModelError):
        load_verifier(dtype="int8")
    # On a CPU with native bfloat16 but no AMX (where auto prefers int8), bfloat16 is
    # the next choice, not float32.
    fake_cpu(settings_env, NO_BF16 | {"avx512_bf16", "avx512_vnni"})
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="cachegate.gateway.verification"):
        v = load_verifier()
    assert v.model.dtype == "bfloat16" and v.model.calibration_dtype == "bfloat16"
    assert "int8 graph failed" in chosen_line(caplog)


def test_auto_without_bf16_or_int8_kernels_is_float32(
    settings_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake_cpu(settings_env, NEITHER)
    with caplog.at_level(logging.INFO, logger="cachegate.gateway.verification"):
        v = load_verifier()
    assert v.model.dtype == "float32" and v.model.calibration_dtype == "float32"
    assert any("emulated" in r.getMessage() for r in caplog.records)


def test_an_explicit_dtype_wins_over_the_cpu(settings_env: pytest.MonkeyPatch) -> None:
    fake_cpu(settings_env, NO_BF16 | {"amx_bf16"})
    settings_env.setenv("CACHEGATE_VERIFIER_DTYPE", "float32")
    assert load_verifier().model.dtype == "float32"
    get_settings.cache_clear()
    fake_cpu(settings_env, NO_BF16)
    settings_env.setenv("CACHEGATE_VERIFIER_DTYPE", "bfloat16")
    v = load_verifier()
    assert v.model.dtype == "bfloat16" and v.model.calibration_dtype == "bfloat16"


def test_the_default_settings_load_the_dtype_this_cpu_resolves_to(settings_env: None) -> None:
    from prefix.model.dtype import cpu_flags

    assert get_settings().verifier_dtype == "auto"
    flags = cpu_flags()
    v = load_verifier()
    if "amx_bf16" in flags:
        expected = "bfloat16"
    elif {"avx2", "avx_vnni", "avx512_vnni", "amx_int8"} & flags:
        expected = "int8"
    elif "avx512_bf16" in flags:
        expected = "bfloat16"
    else:
        expected = "float32"
    assert v.model.dtype == expected and v.model.calibration_dtype == expected
    # The gateway serves the cut of that dtype's calibration (its table's 1% row), with
    # the Chinese half from the int8 graph's own calibration where that one runs.
    shipped = json.loads((MODEL_DIR / CALIBRATION_FILES[v.model.dtype]).read_text())
    row = next(r for r in shipped["table"] if r["target_misfire_rate"] == 0.01)
    if v.model.zh_precision == "float32":
        assert v.shipped_cut(0.01) == pytest.approx(row["cut"], abs=1e-6)
    else:
        zh = json.loads((MODEL_DIR / "zh_encoder.json").read_text())["int8"]["negatives"]
        en = shipped["negatives"]["en"]
        want = max(_cut(np.asarray(en), 0.01), _cut(np.asarray(zh), 0.01))
        assert v.shipped_cut(0.01) == pytest.approx(want, abs=1e-6)


def test_the_backend_setting_reaches_the_verifier_and_is_logged(
    settings_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # float32 (a CPU without native bf16 or int8 kernels): ONNX Runtime by default, torch
    # on request.
    fake_cpu(settings_env, NEITHER)
    settings_env.delenv("CACHEGATE_VERIFIER_BACKEND", raising=False)
    with caplog.at_level(logging.INFO, logger="cachegate.gateway.verification"):
        assert load_verifier().model.backend == "onnx"
    assert any("float32 through onnx" in r.getMessage() for r in caplog.records)
    get_settings.cache_clear()
    settings_env.setenv("CACHEGATE_VERIFIER_BACKEND", "torch")
    assert load_verifier().model.backend == "torch"
    # bfloat16 products stay in torch under auto: they are faster there.
    get_settings.cache_clear()
    settings_env.delenv("CACHEGATE_VERIFIER_BACKEND")
    fake_cpu(settings_env, NO_BF16 | {"amx_bf16"})
    assert load_verifier().model.backend == "torch"
