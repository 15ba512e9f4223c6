"""The pair verifier's float32 forwards through ONNX Runtime: the same scores, in
about half the time.

A cross-encoder forward over a few short pairs is hundreds of small operations,
and eager torch spends much of its time between them. Measured on an AMD EPYC
(Zen 4) core, one thread, five pairs of real questions per call:

* English (MiniLM-L6 cross-encoder, float32): 43.6 ms in torch, 20.4 ms here;
* Chinese (the e5-small cross-encoder, always float32): 58.5 ms in torch, 29.0 ms
  here (5.8 ms a pair, issue 12's goal being 5).

Probabilities agree to ~1.5e-6, so the float32 calibration applies unchanged. The
English path's bfloat16 option stays in torch: on a CPU that computes bfloat16
natively its products are faster still (15 ms for the same five pairs).

Each graph is exported from the loaded torch module at load (in memory: nothing is
written, so it always holds the weights whose checksums the verifier checked) and
must reproduce the torch forward on probe inputs within :data:`MAX_LOGIT_DIFF`
before it is used; :func:`build` raises :class:`~validators.verifier_errors.VerifierModelError`
otherwise, and the verifier then stays on torch (``auto``) or refuses to load
(``onnx``).
"""

from __future__ import annotations

import io
import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from validators.onnx_quantize import MAX_INT8_LOGIT_DIFF, quantize_int8
from validators.verifier_errors import VerifierModelError

log = logging.getLogger("cachegate.validators.verifier")

#: Accepted logit difference between the graph and torch (measured ~1e-5 at most;
#: a probability moves by at most a quarter of it).
MAX_LOGIT_DIFF = 1e-4

#: ONNX Runtime rewrites skipped on the int8 graphs. Fused there (never in the float32
#: graphs), the feed-forward's residual Add + LayerNormalization became one
#: SkipLayerNormalization whose CPU kernel took 222 us where the two ops take ~45 over
#: the same [5, 14, 384] activations (ORT 1.32, one thread, an AMD Zen 4 core): without
#: it an int8 forward of five pairs is ~10% faster (a Chinese lookup; English in shared
#: forwards), a forward of one English pair ~3% (bench/verifier_int8_fusion.py). The scores
#: move (any rounding change moves the per-tensor activation scale of the next dynamic
#: quantization) by as much as int8's own noise reshuffles, no closer to or further
#: from float32, so the int8 calibrations were rescored on this graph (session 31).
INT8_DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)

#: The int8 sessions' version, part of the English int8 score scale's identity
#: (gateway/verification.py), so labels scored by another int8 graph do not count: 2
#: since session 31 skipped the fusion above, which moved English int8 probabilities by
#: 0.0016 on average (at most 0.03) as served, and ran each English pair in a forward of
#: its own (validators/verifier_en.py ``INT8_FORWARD_CHUNK``), which moved them by 0.02
#: (up to 0.10; bench/verifier_int8_rows.py); both landed in one release, so one version
#: covers them.
INT8_SESSION_VERSION = 2

#: What runs a verifier forward: ``auto`` (ONNX Runtime for float32 when installed
#: and checked, else torch), ``torch`` or ``onnx``.
BACKENDS = ("auto", "torch", "onnx")


def is_available() -> bool:
    """Whether the exporter's ``onnx`` and ``onnxruntime`` are installed."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"verifier backend must be one of {BACKENDS}, not {backend!r}")
    return backend


class Bound(torch.nn.Module):
    """``method`` (of ``owner``) as a module's forward, the form the exporter traces;
    ``owner`` is registered, so its weights are the graph's."""

    def __init__(self, owner: torch.nn.Module, method: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.owner = owner
        self._method = method

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self._method(*inputs).float()


class OnnxForward:
    """Arrays in (the module's inputs, in order), the float32 output array out.
    ``InferenceSession.run`` is thread-safe and releases the GIL."""

    def __init__(self, session: Any, input_names: Sequence[str]) -> None:
        self._session = session
        self.input_names = tuple(input_names)

    def __call__(self, *arrays: np.ndarray) -> np.ndarray:
        (out,) = self._session.run(None, dict(zip(self.input_names, arrays, strict=True)))
        return np.asarray(out, dtype=np.float32)


def batches(items: Sequence[Any]) -> list[Sequence[Any]]:
    """Probe batches: the first item alone, the second alone, all of them padded."""
    return [items[:1], items[1:2], items]


def load(
    backend: str, build: Callable[[], OnnxForward], what: str, threads: int
) -> OnnxForward | None:
    """``build()`` for ``onnx``, and for ``auto`` when the packages are installed (the
    export runs on ``threads`` torch threads); ``auto`` logs a failed export or check
    and returns None (torch runs), ``onnx`` raises it."""
    check_backend(backend)
    if backend == "torch" or (backend == "auto" and not is_available()):
        return None
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return build()
    except VerifierModelError as exc:
        if backend == "onnx":
            raise
        log.warning("%s; %s runs in torch", exc, what)
        return None
    finally:
        torch.set_num_threads(previous)


def build(
    module: torch.nn.Module,
    input_names: Sequence[str],
    threads: int,
    probes: Sequence[tuple[torch.Tensor, ...]],
    *,
    int8: bool = False,
) -> OnnxForward:
    """Export ``module`` (inputs with dynamic batch and token axes, one output; traced on
    the last probe), open it with ``threads`` intra-op threads, and check it against
    ``module`` on every probe. ``int8``: its products quantized
    (validators/onnx_quantize.py), checked to that module's looser sanity bound."""
    if not is_available():
        raise VerifierModelError("the onnx backend needs the onnx and onnxruntime packages")
    import onnxruntime as ort

    try:
        graph = export_graph(module, input_names, probes[-1], int8)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(
            graph,
            options,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=list(INT8_DISABLED_OPTIMIZERS) if int8 else None,
        )
    except Exception as exc:
        raise VerifierModelError(
            f"onnx export of the verifier failed: {type(exc).__name__}"
        ) from exc
    forward = OnnxForward(session, input_names)
    worst = max_difference(forward, module, probes)
    bound = MAX_INT8_LOGIT_DIFF if int8 else MAX_LOGIT_DIFF
    if not worst <= bound:
        raise VerifierModelError(
            f"onnx verifier differs from torch by {worst:.2e} (> {bound:.0e}); not used"
        )
    return forward


def export_graph(
    module: torch.nn.Module,
    input_names: Sequence[str],
    traced_on: tuple[torch.Tensor, ...],
    int8: bool,
) -> bytes:
    """The ONNX graph of ``module`` (int8: its products quantized), as bytes. What
    :func:`build` checks before it serves; a function of the module's weights and these
    arguments alone (the test suite keeps one per weights: tests/conftest.py)."""
    buffer = io.BytesIO()
    # The tracer warns about Python-side shape branches; the probe check in build() is
    # what tells whether the trace generalizes.
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module.eval(),
            tuple(traced_on),
            buffer,  # type: ignore[arg-type]  # the TorchScript exporter takes a binary file
            input_names=list(input_names),
            output_names=["logits"],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in input_names},
            opset_version=17,
            dynamo=False,
        )
    return quantize_int8(buffer.getvalue()) if int8 else buffer.getvalue()


def max_difference(
    forward: Callable[..., np.ndarray],
    module: torch.nn.Module,
    probes: Sequence[tuple[torch.Tensor, ...]],
) -> float:
    """Largest output difference between ``forward`` and ``module`` over ``probes``."""
    worst = 0.0
    for inputs in probes:
        with torch.inference_mode():
            want = module(*inputs).float().numpy()
        got = forward(*(t.numpy() for t in inputs))
        if got.shape != want.shape:
            return float("inf")
        worst = max(worst, float(np.abs(got - want).max()))
    return worst
