"""How the semantic-cache latency benchmark fills and checks the index.

``Filler`` writes real questions (and noisy copies of their vectors) straight
into the ``semantic_entries`` table in bulk; ``Precomputed`` answers embeddings
from a table (the lookup path without the model); ``compare_with_flat`` measures
an exact flat index over the same vectors against HNSW (latency, recall).
See bench/semantic_latency.py.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import insert
from tqdm import tqdm

from bench.semantic_common import reply
from bench.semantic_latency_timing import summary, time_each
from semantic import EntryStore, SemanticCache, VectorIndex, normalize_question
from semantic.embedder_base import TextEmbedder
from semantic.models import SemanticEntry
from semantic.question import question_digest

TOP_K = 5
#: Characters of the question quoted in a stored answer.
ANSWER_CHARS = 60


class Filler:
    """Writes synthetic-but-real entries straight into the table, in bulk."""

    def __init__(
        self,
        store: EntryStore,
        embedder_id: str,
        partition: str,
        texts: Sequence[str],
        vectors: NDArray[np.float32],
        entities: Sequence[dict[str, Any]],
        noise: float,
        seed: int,
    ) -> None:
        self.store = store
        self.embedder_id = embedder_id
        self.partition = partition
        self.texts = texts
        self.vectors = vectors
        self.entities = entities
        self.sigma = noise / np.sqrt(vectors.shape[1])
        self.rng = np.random.default_rng(seed)
        self.written = 0
        self.ids: list[int] = []
        self.id_text: dict[int, str] = {}
        self.all_vectors: list[NDArray[np.float32]] = []

    def fill(self, count: int, chunk: int = 5000) -> float:
        started = time.perf_counter()
        now = datetime.now(UTC)
        pool = len(self.texts)
        with tqdm(total=count, desc="bulk insert", unit="row", leave=False) as bar:
            while count > 0:
                n = min(chunk, count)
                positions = np.arange(self.written, self.written + n)
                base, copy = positions % pool, positions // pool
                vecs = self.vectors[base].copy()
                noisy = copy > 0
                if noisy.any():
                    vecs[noisy] += self.rng.normal(0, self.sigma, (int(noisy.sum()), vecs.shape[1]))
                    vecs[noisy] /= np.linalg.norm(vecs[noisy], axis=1, keepdims=True)
                vecs = vecs.astype("<f4")
                rows = []
                for b, c, v in zip(base.tolist(), copy.tolist(), vecs, strict=True):
                    text = self.texts[b]
                    norm = normalize_question(text)
                    rows.append(
                        {
                            "partition_key": self.partition,
                            "tenant": "bench",
                            "question": text,
                            "normalized_question": norm,
                            "question_digest": question_digest(
                                norm if c == 0 else f"{norm}\x00bench-copy-{c}"
                            ),
                            "answer": reply(text, ANSWER_CHARS),
                            "embedding": v.tobytes(),
                            "embedder_id": self.embedder_id,
                            "entities": self.entities[b],
                            "created_at": now,
                            "updated_at": now,
                            "expires_at": None,
                            "ttl_seconds": None,
                            "hit_count": 0,
                        }
                    )
                statement = insert(SemanticEntry).returning(
                    SemanticEntry.id, sort_by_parameter_order=True
                )
                with self.store.engine.begin() as conn:
                    new_ids = [int(i) for (i,) in conn.execute(statement, rows)]
                self.ids += new_ids
                self.id_text.update(zip(new_ids, (r["question"] for r in rows), strict=True))
                self.all_vectors.append(vecs.astype(np.float32))
                self.written += n
                count -= n
                bar.update(n)
        return time.perf_counter() - started


class Precomputed:
    """A TextEmbedder that answers from a table: the lookup path without the model."""

    def __init__(self, inner: TextEmbedder, table: dict[str, NDArray[np.float32]]) -> None:
        self.embedder_id = inner.embedder_id
        self.dim = inner.dim
        self.table = table

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return np.stack([self.table[t] for t in texts])


def compare_with_flat(
    cache: SemanticCache,
    partition: str,
    filler: Filler,
    queries: NDArray[np.float32],
    dim: int,
) -> dict[str, Any]:
    """Exact flat search over the same vectors: its latency and HNSW's recall."""
    index = cache.index.get(partition)
    assert index is not None
    ids = filler.ids
    vectors = np.concatenate(filler.all_vectors)
    # Entries written through store() by the earlier sizes: read their vectors back.
    others = sorted(set(index.ids()) - set(ids))
    entries = cache.entries.get_many(others)
    flat = VectorIndex(dim, approx_threshold=10**9)
    flat.add(np.asarray(ids, dtype=np.int64), vectors)
    if others:
        flat.add(
            np.asarray(others, dtype=np.int64), np.stack([entries[i].embedding for i in others])
        )
    assert len(flat) == len(index)
    text = {**filler.id_text, **{i: e.question for i, e in entries.items()}}
    flat_ms, exact = time_each(list(queries), lambda v: flat.search(v, TOP_K), "flat search")
    default_ef = index.ef_search
    by_ef: dict[str, Any] = {}
    for ef in sorted({default_ef, 128, 256}):
        index.ef_search = ef  # read at search time (SearchParametersHNSW)
        ms, approx = time_each(
            list(queries), lambda v: cache.index.search(partition, v, TOP_K), f"hnsw ef={ef}"
        )
        pairs = list(zip(approx, exact, strict=True))
        by_ef[str(ef)] = {
            "search": summary(ms),
            "recall_at_1": round(float(np.mean([a[0][0] == e[0][0] for a, e in pairs])), 4),
            "recall_at_5": round(
                float(
                    np.mean([len({i for i, _ in a} & {i for i, _ in e}) / len(e) for a, e in pairs])
                ),
                4,
            ),
            "top1_same_question_text": round(
                float(np.mean([text[a[0][0]] == text[e[0][0]] for a, e in pairs])), 4
            ),
        }
    index.ef_search = default_ef
    base = by_ef[str(default_ef)]
    return {
        "flat_search_same_vectors": summary(flat_ms),
        "hnsw_ef_search_default": default_ef,
        "hnsw_recall_at_1": base["recall_at_1"],
        "hnsw_recall_at_5": base["recall_at_5"],
        "hnsw_top1_same_question_text": base["top1_same_question_text"],
        "hnsw_by_ef_search": by_ef,
    }
