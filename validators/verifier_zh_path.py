"""The pair verifier's Chinese half: the cross-encoder (loaded on first use), the map
of its scores onto the English scale, and the calibration lists of its precision.

The fine-tuned cross-encoder lives in validators/verifier_zh_encoder.py; its map onto
the English scale is fitted at calibration (bench/train_verifier.py). The encoder
itself loads on the first Chinese pair (a few seconds, ~100 MB): a deployment without
Chinese traffic never pays for it. In int8 (validators/onnx_quantize.py) the map and
the Chinese calibration lists are the int8 graph's own: an int8 score read against
float32 cuts would miss the tenant's bound.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from validators import verifier_zh_encoder
from validators.verifier_errors import VerifierModelError
from validators.verifier_zh_encoder import ChineseEncoder


class ChinesePath:
    """``scores(pairs)``: probabilities on the common (English) scale, None for a pair
    longer than the encoder reads. ``id`` keys remembered Chinese verdicts."""

    def __init__(
        self,
        model_dir: Path,
        *,
        precision: str,
        backend: str,
        threads: int,
        en_weights_sha256: str,
    ) -> None:
        self.model_dir = model_dir
        self.precision, self.backend, self.threads = precision, backend, threads
        self.model_file = model_dir / verifier_zh_encoder.META_FILE
        meta = json.loads(self.model_file.read_text())
        self.weights_sha256 = str(meta["weights_sha256"])
        self.id = self.weights_sha256
        scale = meta["to_common_scale"]
        #: The float32 encoder's map onto the common scale (the int8 graph's own map is
        #: fitted beside it, at the same calibration).
        self.float32_scale: dict[str, Any] = scale
        #: The int8 graph's calibration lists (None: the calibration file's, float32).
        self.negatives: list[float] | None = None
        self.positives: list[float] | None = None
        if precision == "int8":
            if backend == "torch":
                raise VerifierModelError("the int8 Chinese verifier runs in ONNX Runtime")
            int8 = verifier_zh_encoder.int8_calibration(model_dir, en_weights_sha256)
            if int8 is None:
                raise VerifierModelError(
                    "no int8 calibration of the Chinese verifier is shipped for these "
                    "weights (bench/train_verifier.py --skip-training --calibrate-zh-int8)"
                )
            self.id += ":int8"
            scale = int8["to_common_scale"]
            self.negatives, self.positives = int8["negatives"], int8["positives"]
        self._scale = (np.asarray(scale["x"]), np.asarray(scale["y"]))
        self._encoder: ChineseEncoder | None = None
        self._load_lock = threading.Lock()

    def calibration(self, calibration: dict[str, Any]) -> dict[str, Any]:
        """``calibration`` with this precision's Chinese lists in place."""
        if self.negatives is None or self.positives is None:
            return calibration
        return {
            **calibration,
            "negatives": {**calibration["negatives"], "zh": self.negatives},
            "positives": {**calibration["positives"], "zh": self.positives},
        }

    @property
    def is_loaded(self) -> bool:
        return self._encoder is not None

    @property
    def encoder(self) -> ChineseEncoder:
        """The cross-encoder, loaded on first use (a ``VerifierModelError`` when its files
        do not check out: never a guess)."""
        with self._load_lock:
            if self._encoder is None:
                encoder = ChineseEncoder(
                    self.model_dir,
                    threads=self.threads,
                    backend=self.backend,
                    precision=self.precision,
                )
                # Checked before it is kept: weights that changed stay refused on every
                # later call, not only the first.
                if encoder.weights_sha256 != self.weights_sha256:
                    raise VerifierModelError("Chinese verifier weights changed after start")
                self._encoder = encoder
        return self._encoder

    def raw_scores(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        """The cross-encoder's own probabilities, before the common-scale map."""
        return self.encoder.score(pairs)

    def scores(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        x, y = self._scale
        return [None if r is None else float(np.interp(r, x, y)) for r in self.raw_scores(pairs)]
