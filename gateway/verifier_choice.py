"""What the pair verifier computes in on this machine: the ``auto`` rules of
``CACHEGATE_VERIFIER_DTYPE`` (English) and ``CACHEGATE_VERIFIER_ZH_PRECISION``
(Chinese), each answered with its reason, which the gateway logs at start.

Every choice reads its own shipped calibration, so the tenant's misfire bound holds
in each; what differs is speed and how many paraphrases the cut keeps. English, a
batch of five pairs (bench/results/verifier_backends_*.json):

* bfloat16 where the CPU has AMX: within the 5 ms goal there (3.8-4.2 ms a pair) and
  float32's ranking (English int8 was never timed on AMX);
* int8 (ONNX Runtime, 7-bit weights: the same scores on every x86 CPU) where the
  CPU has its u8s8 kernels (:data:`INT8_CPU_FLAGS`), ONNX Runtime runs the verifier
  and the int8 calibration is shipped. That includes CPUs with AVX512-BF16 but no
  AMX (AMD Zen 4), where bfloat16 is native but int8 on VNNI was 1.6-1.9x faster in
  every same-run comparison: 3.88 against 7.37 ms a pair
  (verifier_backends_epyc_zen4.json; 5.4 against 9.0 in session 17's ``--forward``
  bench), for 1-1.5 points of paraphrase recall at the same misfire bound (50.8%
  against 52.2% of English calibration positives at the 1% target);
* bfloat16 where it is native but int8 cannot run (no int8 calibration, the torch
  backend);
* float32 elsewhere (emulated bf16 is slower than float32; ARM's int8 kernels were
  never measured).

The Chinese cross-encoder has no bfloat16 gain (its e5 encoder measured none), so
it is int8 or float32 by the same int8 conditions.

Imports torch only through ``prefix.model.dtype`` when called (the verifier is on).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from validators.verifier_dtype import Dtype

#: CPU flags (as /proc/cpuinfo spells them) under which ONNX Runtime's u8s8 kernels run
#: and the int8 graphs were measured faster than float32: int8 dot products (VNNI, AMX:
#: Chinese x0.41 a pair on a Sapphire Rapids core) and plain AVX2 (Chinese x0.62 on an
#: EPYC, bench/results/verifier_backends_epyc.json; English in
#: verifier_backends_epyc_avx2.json). Their scores are the same on all of them: the
#: weights keep 7 bits, so AVX2's int16 pair sums cannot saturate
#: (validators/onnx_quantize.py). Other CPUs (ARM: other kernels, not measured) get
#: float32.
INT8_CPU_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni", "avx2")
#: the flag under which bfloat16 beats int8 for the English verifier (AMX tiles)
AMX_BF16 = "amx_bf16"


def _int8_kernels(backend: str, flags: frozenset[str] | None) -> tuple[bool, str]:
    """Whether an int8 graph would run fast here, and why (not)."""
    from prefix.model.dtype import cpu_flags
    from validators import onnx_forward

    if backend == "torch" or not onnx_forward.is_available():
        return False, "int8 runs in ONNX Runtime only"
    found = [f for f in INT8_CPU_FLAGS if f in (cpu_flags() if flags is None else flags)]
    if not found:
        return False, "no int8 kernels measured for this CPU (AVX2, VNNI, AMX)"
    return True, f"CPU has {', '.join(found)}"


def _en_weights() -> str:
    from validators.verifier import MODEL_DIR

    return str(json.loads((MODEL_DIR / "verifier.json").read_text())["weights_sha256"])


def resolve_zh_precision(
    setting: str, backend: str, flags: frozenset[str] | None = None
) -> tuple[str, str]:
    """``(precision, why)`` for the Chinese verifier: an explicit setting as given;
    ``auto`` is int8 where the int8 kernels run (:func:`_int8_kernels`) and its int8
    calibration is shipped, float32 elsewhere."""
    from validators import verifier_zh_encoder
    from validators.verifier import MODEL_DIR

    if setting != "auto":
        return setting, "set"
    fast, why = _int8_kernels(backend, flags)
    if not fast:
        return "float32", why
    if verifier_zh_encoder.int8_calibration(MODEL_DIR, _en_weights()) is None:
        return "float32", "no int8 calibration shipped for these weights"
    return "int8", why


def resolve_dtype(
    setting: str, backend: str, flags: frozenset[str] | None = None
) -> tuple[Dtype, str]:
    """``(dtype, why)`` for the English verifier: an explicit setting as given; ``auto``
    is bfloat16 where the CPU has AMX and the backend may be torch, else int8 as for
    Chinese (with a usable int8 calibration: the one the verifier itself would read),
    else bfloat16 where the CPU computes it natively (the engine's rule,
    ``prefix.model.dtype``) and the backend may be torch, else float32."""
    from prefix.model.dtype import cpu_bf16_reason, cpu_flags

    if setting != "auto":
        return cast("Dtype", setting), "set"
    flags = cpu_flags() if flags is None else flags
    bf16 = cpu_bf16_reason(flags)
    torch_ok = backend != "onnx"  # bfloat16 runs in torch only
    if bf16 is not None and torch_ok and AMX_BF16 in flags:
        return "bfloat16", bf16
    fast, why = _int8_kernels(backend, flags)
    if fast and not _en_int8_calibrated():
        fast, why = False, "no int8 calibration shipped for these weights"
    if bf16 is not None and torch_ok:
        if not fast:
            return "bfloat16", f"{bf16}; not int8: {why}"
        return "int8", f"{bf16} but no AMX, where int8 is faster; {why}"
    if bf16 is None:
        no_bf16 = "no native bfloat16 (emulated is slower)"
    else:
        no_bf16 = "bfloat16 runs in torch, not the onnx backend"
    if not fast:
        return "float32", f"{no_bf16}; {why}"
    return "int8", f"{no_bf16}; {why}"


def _en_int8_calibrated() -> bool:
    """Whether the English int8 calibration the verifier would read is shipped."""
    from validators.verifier import MODEL_DIR
    from validators.verifier_calibration import read_calibration

    try:
        read_calibration(MODEL_DIR, "int8", _en_weights())
    except (OSError, ValueError):
        return False
    return True


def int8_fallback(backend: str, flags: frozenset[str] | None = None) -> Dtype:
    """What ``auto`` runs when the int8 graph it chose fails at load (export, quantizer,
    probe check): bfloat16 where the CPU computes it natively and torch may run it
    (AVX512-BF16 without AMX), else float32."""
    from prefix.model.dtype import cpu_bf16_reason

    native = cpu_bf16_reason(flags) is not None
    return "bfloat16" if native and backend != "onnx" else "float32"
