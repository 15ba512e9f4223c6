"""Shadow verification's comparison of a served answer with a fresh one.

The answers agree when their cosine reaches the floor and the entity validators find
the same numbers, amounts and dates in both (``entity_comparison["answers"]``). The
floor, ``CACHEGATE_SHADOW_MIN_SIMILARITY`` (0.80), is a MiniLM cosine, as every
similarity knob is (semantic/embedder_routed.py). Answers e5 compares (Chinese ones
under ``auto``, every one under ``e5``) are read on e5's scale, where unrelated texts
score 0.8 and more: there the floor is put on that scale by ``on_routed_scale`` (0.80 →
0.9375), the map that puts MiniLM's retrieval threshold on e5's. Measured on intent
questions, the only labelled texts at hand (``bench/shadow_scale.py``): at 0.80, e5
agreed with 98% of Chinese question pairs of different meaning (67% English); at 0.9375
with 0.06% (0.02%) and with 48% (29%) of same-meaning pairs, where MiniLM at 0.80 agrees
with 0% and 28%.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from semantic.embedder_base import TextEmbedder
from semantic.embedder_e5 import E5_SCALE
from semantic.embedder_routed import on_routed_scale
from semantic.errors import InvalidQuestionError
from validators import ValidatorError, compare_entities, extract_entities

DEFAULT_MIN_SIMILARITY = 0.80


def floor_for(embedder: TextEmbedder, min_similarity: float) -> float:
    """``min_similarity`` (a MiniLM cosine) on the scale of ``embedder``'s cosines: e5's
    (any e5 model file, also behind a proxy such as tracing's) through
    :func:`on_routed_scale`; any other embedder's as given."""
    if getattr(embedder, "cosine_scale", None) == E5_SCALE:
        return on_routed_scale(min_similarity)
    return min_similarity


def entity_comparison(a: str, b: str, kinds: list[str] | None = None) -> dict[str, Any]:
    """``compare_entities`` of two texts as JSON, or ``{"error": ...}`` when a text is unusable."""
    try:
        return compare_entities(extract_entities(a), extract_entities(b), kinds).to_dict()
    except ValidatorError as exc:
        return {"error": str(exc)[:200]}


def _embed_fitting(embedder: TextEmbedder, texts: list[str]) -> np.ndarray:
    """Embed texts, shortening any the embedder refuses as too long (answers can be long)."""
    fitted = [t[:4000] for t in texts]
    for _ in range(8):
        try:
            return np.asarray(embedder.embed(fitted), dtype=np.float32)
        except InvalidQuestionError as exc:
            if "empty" in str(exc) or "NUL" in str(exc):
                raise
            fitted = [t[: max(1, len(t) * 2 // 3)] for t in fitted]
    raise InvalidQuestionError("answers too long to embed")


@dataclass(frozen=True)
class ShadowResult:
    verdict: str  # "agree" | "disagree"
    similarity: float
    entities: dict[str, Any]
    #: the cosine ``agree`` needed, on the scale of the embedder that compared them;
    #: None when none did (identical or empty answers)
    floor: float | None


def compare_answers(
    embedder: TextEmbedder | None,
    served: str,
    fresh: str,
    min_similarity: float = DEFAULT_MIN_SIMILARITY,
) -> ShadowResult:
    """Cosine similarity of the answers' embeddings + the validators on the answers."""
    floor: float | None = None  # no embedding comparison: the similarity decides alone
    if not served.strip() or not fresh.strip():
        similarity = 1.0 if served.strip() == fresh.strip() else 0.0
    elif served == fresh:
        similarity = 1.0
    elif embedder is None:
        raise ValueError("comparing different answers needs an embedder")
    else:
        plain_for = getattr(embedder, "plain_for", None)  # auto's, also behind a proxy
        if plain_for is not None:
            # One plain embedder's own cosine: MiniLM when it reads both answers, else
            # e5 (never the 0 of two routes, nor the routed scale).
            embedder = plain_for([served[:4000], fresh[:4000]])
        floor = floor_for(embedder, min_similarity)
        vectors = _embed_fitting(embedder, [served, fresh])
        similarity = float(np.clip(np.dot(vectors[0], vectors[1]), -1.0, 1.0))
    entities = entity_comparison(served, fresh) if served.strip() and fresh.strip() else {}
    entities_ok = bool(entities.get("matches", True))
    reached = similarity >= (min_similarity if floor is None else floor)
    verdict = "agree" if reached and entities_ok else "disagree"
    return ShadowResult(verdict, similarity, entities, floor)
