"""The embedder's direct forward (small batches skip ``encode``): same vectors,
same length refusal."""

from __future__ import annotations

import numpy as np
import pytest

from semantic import Embedder
from semantic.errors import InvalidQuestionError

QUESTIONS = [
    "How do I reset my card PIN?",
    "what is the exchange rate for euros today",
    "My transfer has not arrived yet, what should I do about it?",
]


def _through_encode(embedder: Embedder, texts: list[str]) -> np.ndarray:
    embedder._direct = False
    try:
        return embedder.embed(texts)
    finally:
        embedder._direct = True


def test_direct_forward_gives_encodes_vectors(embedder: Embedder) -> None:
    assert embedder._direct  # the bundled model has no default prompt
    for texts in ([QUESTIONS[0]], QUESTIONS):
        direct = embedder.embed(texts)
        assert direct.shape == (len(texts), embedder.dim) and direct.dtype == np.float32
        np.testing.assert_allclose(direct, _through_encode(embedder, texts), atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(direct, axis=1), 1.0, atol=1e-5)


def test_direct_forward_refuses_a_question_past_the_window(embedder: Embedder) -> None:
    fits = "card " * (embedder.max_tokens - 2)  # exactly the window with [CLS] and [SEP]
    assert embedder.count_tokens([fits]) == [embedder.max_tokens]
    assert embedder.embed([fits]).shape == (1, embedder.dim)
    with pytest.raises(InvalidQuestionError, match="tokens"):
        embedder.embed([QUESTIONS[0], fits + "card"])
