"""What bench/semantic_eval.py and bench/semantic_latency.py share.

Embedding many texts in batches (shortest first: less padding), keeping only the
questions the embedder reads whole, and the chat reply and ``SemanticQuery`` the
benchmarks store and look up (tenant ``bench``, model ``bench-model``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tqdm import tqdm

from bench.semantic_data import Question
from semantic import Embedder, SemanticQuery
from semantic.embedder_base import TextEmbedder


def embed_all(
    embedder: Embedder, texts: Sequence[str], batch: int = 256
) -> tuple[dict[str, int], NDArray[np.float32]]:
    """Embed every distinct text once (shortest first: less padding): text -> row, matrix."""
    unique = sorted(set(texts), key=lambda t: (len(t), t))
    rows = []
    with tqdm(total=len(unique), desc="embedding", unit="text") as bar:
        for lo in range(0, len(unique), batch):
            chunk = unique[lo : lo + batch]
            rows.append(embedder.embed(chunk))
            bar.update(len(chunk))
    matrix = np.concatenate(rows) if rows else np.empty((0, embedder.dim), np.float32)
    return {t: i for i, t in enumerate(unique)}, matrix


def fits(embedder: Embedder, questions: Sequence[Question]) -> list[Question]:
    """Questions the embedder reads whole (it refuses to truncate)."""
    counts = embedder.count_tokens([q.text for q in questions])
    return [q for q, n in zip(questions, counts, strict=True) if n <= embedder.max_tokens]


def embed_batches(embedder: TextEmbedder, texts: Sequence[str], batch: int = 256) -> NDArray:
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    with tqdm(total=len(texts), desc="embedding pool", unit="text") as bar:
        for lo in range(0, len(order), batch):
            idx = order[lo : lo + batch]
            out[idx] = embedder.embed([texts[i] for i in idx])
            bar.update(len(idx))
    return out


def reply(text: str, limit: int | None = None) -> dict[str, Any]:
    """A chat completion answering ``text`` (its first ``limit`` characters quoted)."""
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"(answer to: {text[:limit]})"},
                "finish_reason": "stop",
            }
        ],
    }


def query(text: str, context: Sequence[dict[str, str]] = ()) -> SemanticQuery:
    return SemanticQuery(tenant="bench", model="bench-model", question=text, context=tuple(context))
