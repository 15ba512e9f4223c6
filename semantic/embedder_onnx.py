"""The sentence-transformers embedder's forward through ONNX Runtime.

Embedding one short question is a few hundred small operations; in eager torch
most of its time is spent between them, not in them. all-MiniLM-L6-v2 on one
12-token question, one thread, on an AMD EPYC (Zen 4) core: 7.4 ms in torch, 3.4
ms in ONNX Runtime, with vectors equal to ~1e-7 (issue 15: a lookup's budget is
10 ms including the embedding).

The graph is exported from the loaded model at start (in memory, ~1.5 s): the
weights it runs are exactly the files the embedder id digests, and nothing is
written to disk. It covers the whole sentence-transformers pipeline (transformer,
pooling, normalization). Before it is used, :func:`build_onnx_forward` checks it
against the torch forward on probe texts, alone and as one padded batch; a graph
that differs by more than :data:`MAX_ABS_DIFF` in any component is refused with
:class:`~semantic.errors.EmbedderError`. The two forwards are the same computation
in float32, so a vector keeps its embedder id whichever one made it.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from semantic.errors import EmbedderError

#: Largest component difference accepted between the ONNX and torch vectors (unit
#: vectors; measured ~1e-7 for all-MiniLM-L6-v2). A cosine threshold of 0.9 is five
#: orders of magnitude coarser.
MAX_ABS_DIFF = 1e-5

#: Probe texts of different lengths, so the padded batch exercises the mask.
PROBES = (
    "hi",
    "How do I reset my card PIN?",
    "My transfer has not arrived yet after three days, what should I do about it?",
)

#: A features-to-vectors forward: ``preprocess()`` output in, ``(n, dim)`` unit vectors out.
Forward = Callable[[Mapping[str, Any]], NDArray[np.float32]]


def is_available() -> bool:
    """Whether both the exporter's ``onnx`` and ``onnxruntime`` can be imported."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


class OnnxForward:
    """Runs the exported graph: int64 token arrays in, float32 unit vectors out.

    ``InferenceSession.run`` is thread-safe and releases the GIL, like a torch forward.
    """

    def __init__(self, session: Any, input_names: Sequence[str]) -> None:
        self._session = session
        self.input_names = tuple(input_names)

    def __call__(self, features: Mapping[str, Any]) -> NDArray[np.float32]:
        feed = {name: np.asarray(features[name], dtype=np.int64) for name in self.input_names}
        (vectors,) = self._session.run(None, feed)
        return np.asarray(vectors, dtype=np.float32)


def export_onnx(model: Any, features: Mapping[str, Any]) -> tuple[bytes, list[str]]:
    """The ONNX graph of ``model`` (a SentenceTransformer) from features to unit
    vectors, with batch and sequence axes dynamic, and its input names."""
    import torch

    names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in features]

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            pooled = self.model(dict(zip(names, tensors, strict=True)))["sentence_embedding"]
            return torch.nn.functional.normalize(pooled.float(), p=2, dim=1)

    args = tuple(features[name] for name in names)
    buffer = io.BytesIO()
    # The tracer warns about Python-side branches on shapes (mask padding, causal
    # flags); the probe check below is what tells whether the trace generalizes.
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pipeline().eval(),
            args,
            buffer,  # type: ignore[arg-type]  # the TorchScript exporter takes a binary file
            input_names=names,
            output_names=["sentence_embedding"],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in names},
            opset_version=17,
            dynamo=False,
        )
    return buffer.getvalue(), names


def build_onnx_forward(
    model: Any, threads: int | None, reference: Forward, probes: Sequence[str] = PROBES
) -> OnnxForward:
    """Export ``model``, open it in ONNX Runtime with ``threads`` intra-op threads
    (None: its default) and check it against ``reference`` (the torch forward) on
    ``probes``; raises :class:`EmbedderError` when any step fails or differs."""
    if not is_available():
        raise EmbedderError("onnxruntime backend needs the onnx and onnxruntime packages")
    import onnxruntime as ort

    try:
        graph, names = export_onnx(model, model.preprocess(list(probes)))
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only: its fusion notes are not ours to log
        if threads is not None:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise EmbedderError(f"onnx export of the embedder failed: {type(exc).__name__}") from exc
    forward = OnnxForward(session, names)
    worst = 0.0
    for texts in [[probe] for probe in probes] + [list(probes)]:
        features = model.preprocess(texts)
        got, want = forward(features), reference(features)
        if got.shape != want.shape:
            raise EmbedderError(f"onnx embedder returned shape {got.shape}, torch {want.shape}")
        worst = max(worst, float(np.abs(got - want).max()))
    if not worst <= MAX_ABS_DIFF:
        raise EmbedderError(
            f"onnx embedder differs from torch by {worst:.2e} (> {MAX_ABS_DIFF:.0e}); not used"
        )
    return forward
