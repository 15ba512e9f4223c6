"""What every embedder of the semantic cache is: :class:`TextEmbedder` (an id, a
dimension, unit vectors) and :class:`CoveringEmbedder` (one that can also say how much
of a text it represents), with the coverage arithmetic they share.

Implementations: :class:`semantic.embedder.Embedder` (sentence-transformers, MiniLM),
:class:`semantic.embedder_e5.E5Embedder` (multilingual-e5) and
:class:`semantic.embedder_routed.RoutedEmbedder` (``auto``: each question to the first
that covers it).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray


@runtime_checkable
class TextEmbedder(Protocol):
    """What :class:`semantic.cache.SemanticCache` needs from an embedder."""

    @property
    def embedder_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


@runtime_checkable
class CoveringEmbedder(TextEmbedder, Protocol):
    """An embedder that can say how much of a text it actually represents.

    ``coverage(text)`` is the fraction of the text's letters and digits that
    reach the model as known tokens of a script it was trained on. Two texts
    whose uncovered parts differ embed alike (ten ``[UNK]`` tokens are ten
    ``[UNK]`` tokens, whatever the Chinese was), so below a floor the cache
    must not serve the question (``semantic.embedders.MIN_COVERAGE``).
    """

    def coverage(self, text: str) -> float: ...


def is_word_char(ch: str) -> bool:
    """Letters and digits: what carries meaning. Punctuation, symbols and emoji
    are left out of coverage, so "reset my password? 🙏" is fully covered."""
    return unicodedata.category(ch)[0] in "LN"


def covered_fraction(flags: Sequence[bool]) -> float:
    """Share of covered word characters; a text with none has nothing to represent (0.0)."""
    return sum(flags) / len(flags) if flags else 0.0
