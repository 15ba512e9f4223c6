"""The question → vector step of a lookup: coverage check, per-tenant LRU, batching.

Popular questions repeat word for word; an embedding is ~10 ms of CPU, a dict hit
microseconds, so vectors are kept in an LRU keyed by (scope, question), the scope
being the query's partition namespace (:func:`memo_scope`) — a shared entry would let
one tenant, or one end user of a tenant whose cache is scoped per user, learn from the
response time whether another asked a question recently. Concurrent lookups'
questions share one forward (:mod:`semantic.embed_batcher`). ``embedder`` may be
replaced after construction (the gateway wraps it for tracing); the batcher follows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from semantic.embed_batcher import EmbedBatcher
from semantic.embedder_base import TextEmbedder
from semantic.embedders import MIN_COVERAGE
from semantic.partition import SemanticQuery
from semantic.vectors import check_vectors

T = TypeVar("T")

#: Question texts whose embeddings are kept (LRU); 4,096 × 384 floats ≈ 6 MiB.
VECTOR_CACHE_SIZE = 4096


def memo_scope(query: SemanticQuery) -> str:
    """Whose memo the query's question goes in: its partition's namespace (the tenant's,
    narrowed to the end user or the client's namespace where the partition is), else
    the tenant. Never wider than the partition, so a memo hit reveals nothing the
    partition's own entries would not."""
    return query.namespace or query.tenant


class QuestionVectors:
    def __init__(self, embedder: TextEmbedder, size: int = VECTOR_CACHE_SIZE) -> None:
        self._batcher = EmbedBatcher(embedder)
        self._embedder = embedder
        self.size = size
        self._lock = threading.Lock()
        self._vectors: OrderedDict[tuple[str, ...], NDArray[np.float32]] = OrderedDict()
        # coverage is a tokenization (~0.1-0.3 ms of a ~2 ms hit): kept like the vectors
        self._supported: OrderedDict[tuple[str, ...], bool] = OrderedDict()
        # the scenario guards' verdict ("" = none fired): their regular expressions were
        # an eighth of a cached hit's CPU under load; a pure function of text and guards
        self._guarded: OrderedDict[tuple[str, ...], str] = OrderedDict()

    @property
    def embedder(self) -> TextEmbedder:
        return self._embedder

    @embedder.setter
    def embedder(self, embedder: TextEmbedder) -> None:
        same_model = embedder.embedder_id == self._embedder.embedder_id  # e.g. a tracing wrapper
        self._embedder = self._batcher.embedder = embedder
        with self._lock:
            self._supported.clear()
            if not same_model:  # another model's vectors must never be compared with these
                self._vectors.clear()
                self._guarded.clear()

    def is_supported(self, question: str, tenant: str = "") -> bool:
        """Whether the embedder represents every letter of ``question`` (issue 12: with
        MiniLM, "你们几点开门几点关门" is ten [UNK]s and collides with unrelated Chinese).
        An embedder without ``coverage`` is trusted as it was before coverage existed.
        Answers are kept per (tenant, question), as the vectors are, so that a fast
        answer never tells one tenant what another asked."""
        key = (tenant, question)
        known = self._recall(self._supported, key)
        if known is not None:
            return known
        coverage = getattr(self._embedder, "coverage", None)
        supported = coverage is None or float(coverage(question)) >= MIN_COVERAGE
        self._keep(self._supported, key, supported)
        return supported

    def vector(self, tenant: str, question: str) -> NDArray[np.float32]:
        """The question's ``(dim,)`` unit vector (read-only)."""
        key = (tenant, question)
        cached = self._recall(self._vectors, key)
        if cached is not None:
            return cached
        vector = check_vectors(self._batcher.embed_one(question), self._embedder.dim)[0]
        vector.setflags(write=False)
        self._keep(self._vectors, key, vector)
        return vector

    def guarded(
        self, tenant: str, question: str, guards: tuple[str, ...], check: Callable[[], str | None]
    ) -> str | None:
        """``check()`` (the guards' refusal, or None), remembered per (tenant, question,
        guards) like the vectors."""
        key = (tenant, question, *guards)
        known = self._recall(self._guarded, key)
        if known is None:
            known = check() or ""
            self._keep(self._guarded, key, known)
        return known or None

    def cached(self, tenant: str, question: str) -> NDArray[np.float32] | None:
        """The question's vector if it is kept, else None (nothing is embedded)."""
        return self._recall(self._vectors, (tenant, question))

    def _recall(self, memo: OrderedDict[tuple[str, ...], T], key: tuple[str, ...]) -> T | None:
        with self._lock:
            value = memo.get(key)
            if value is not None:
                memo.move_to_end(key)
            return value

    def _keep(self, memo: OrderedDict[tuple[str, ...], T], key: tuple[str, ...], value: T) -> None:
        with self._lock:
            memo[key] = value
            if len(memo) > self.size:
                memo.popitem(last=False)
