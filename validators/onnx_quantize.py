"""Dynamic int8 quantization of a verifier graph (the Chinese cross-encoder's products,
and since session 18 the English one's with ``CACHEGATE_VERIFIER_DTYPE=int8``,
calibrated in ``calibration_int8.json``; validators/verifier_dtype.py).

The Chinese cross-encoder (e5-small, 12 layers) is the slowest thing on the hit path
that is not cached: 8.3 ms a pair in float32 ONNX Runtime on a Sapphire Rapids core
(issue 12's goal being 5). Its matrix products in int8 (weights per output channel,
activations per tensor, quantized at run time by ONNX Runtime's integer kernels,
which use VNNI/AMX where the CPU has them) take 3.4 ms (bench/verifier_backends.py).

Scores move (a probability by ~0.09 on average with the 7-bit weights below), yet
the ranking is nearly as good: AUC 0.865 against 0.869 on the held-out Chinese pairs
(bench/results/verifier_eval_zh_{int8,float32}.json). So the int8 graph has a
calibration of its own (``zh_encoder.json``, key ``int8``, written by
``bench/train_verifier.py --skip-training --calibrate-zh-int8``): its cut for a
target misfire rate is read off its own scores, never the float32 ones. Per-tensor
weights ranked worse in a scratch comparison (AUC 0.836), hence per channel. The
weights keep 7 bits (``reduce_range``), so the products are exact on every x86 CPU
and one calibration holds wherever the graph runs (see :func:`quantize_int8`).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

#: Largest logit difference from the float32 module accepted on the probe pairs: a
#: sanity bound that a broken graph fails (the measured worst is ~0.7 with 8-bit
#: weights, 1.6 with the 7-bit ones shipped), not a promise of equal scores, which is
#: what the int8 calibration is for.
MAX_INT8_LOGIT_DIFF = 2.5


def quantize_int8(model: bytes) -> bytes:
    """``model`` (a float32 ONNX graph) with its MatMul weights in int8, per channel.

    The graph is first optimized (constant folding, fusions) as ONNX Runtime
    recommends before quantization; both steps run in a temporary directory, as the
    quantizer writes files. Raises what the optimizer or the quantizer raise."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="cachegate-int8-") as tmp:
        optimized, quantized = Path(tmp) / "optimized.onnx", Path(tmp) / "int8.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(optimized)
        options.log_severity_level = 3
        ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        # The quantizer logs a pre-processing hint through the root logger; it was done.
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)
        try:
            quantize_dynamic(
                str(optimized),
                str(quantized),
                op_types_to_quantize=["MatMul"],
                per_channel=True,
                weight_type=QuantType.QInt8,
                # 7-bit weights: without VNNI/AMX, ONNX Runtime's u8 x s8 kernels add
                # pairs of products in int16, which 255 * 127 * 2 overflows (measured on
                # an AVX2 EPYC: errors of ~8% of a product's range), so the same graph
                # would score differently by CPU and the int8 calibration would hold on
                # one kind only. 255 * 63 * 2 fits; the cost is one bit of weight.
                reduce_range=True,
            )
        finally:
            root.setLevel(level)
        return quantized.read_bytes()
