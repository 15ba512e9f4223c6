"""Shadow verification under CACHEGATE_EMBEDDER=auto compares two answers on one
plain embedder's own scale, which ``shadow_min_similarity`` is written in: MiniLM's
when it reads both, else e5's (never the 0 of two routes, never the routed scale)."""

from __future__ import annotations

import pytest

from gateway.review.shadow import compare_answers
from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder


def test_answers_are_read_as_each_embedder_would(embedder: Embedder) -> None:
    routed = RoutedEmbedder(embedder, E5Embedder(progress=False))
    a, b = "Paris is the capital of France.", "The capital of France is Paris."
    assert compare_answers(routed, a, b).similarity == pytest.approx(
        compare_answers(embedder, a, b).similarity, abs=1e-5
    )  # MiniLM's own cosine, not the routed one
    mixed = compare_answers(routed, "法国的首都是巴黎。", "The capital of France is Paris.")
    assert mixed.similarity > 0.5  # e5 reads both: not the 0 of two routes
