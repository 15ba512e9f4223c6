"""Issue 15 before/after of the lookup, interleaved in one run (``semantic_latency.py
--before-after``).

*before*: ``SentenceTransformer.encode`` for the one question (tokenized twice: once
for the length check) and one hit-count write per hit inside the lookup; *after*: the
embedder's direct forward (``Embedder._forward``) and hit counts written in batches by
a background thread (``semantic.hit_counter``). Each text is looked up once through a
cache of each kind (each cache has its own question-vector LRU, so both embed it), the
order alternating text by text, so the machine's noise falls on both alike.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.semantic_common import query
from bench.semantic_latency_timing import summary
from semantic import Embedder, EntryStore, PartitionedIndex, SemanticCache, SemanticPolicy


def _interleaved(
    texts: Sequence[str], runs: dict[str, Callable[[str], Any]]
) -> dict[str, list[float]]:
    gc.collect()
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for i, text in enumerate(texts):
        for name in names if i % 2 == 0 else names[::-1]:
            t0 = time.perf_counter_ns()
            runs[name](text)
            times[name].append((time.perf_counter_ns() - t0) / 1e6)
    return times


def _report(times: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {name: summary(v) for name, v in times.items()}
    b, a = out["before"]["p50_ms"], out["after"]["p50_ms"]
    out["after_over_before_p50"] = round(a / b, 3) if b else None
    out["loadavg"] = list(os.getloadavg())
    return out


def _direct(embedder: Embedder, on: bool) -> None:
    embedder._direct = on


def embed_before_after(embedder: Embedder, texts: Sequence[str]) -> dict[str, Any]:
    """One question embedded through ``encode`` vs the direct forward."""

    def run(on: bool) -> Callable[[str], Any]:
        def embed(text: str) -> Any:
            _direct(embedder, on)
            return embedder.embed([text])

        return embed

    try:
        return _report(_interleaved(texts, {"before": run(False), "after": run(True)}))
    finally:
        _direct(embedder, True)


def before_after(
    embedder: Embedder,
    store: EntryStore,
    index: PartitionedIndex,
    validator: Any,
    policy: SemanticPolicy,
    texts: Sequence[str],
) -> dict[str, Any]:
    """Whole lookups through a 'before' and an 'after' cache over the same index."""
    before = SemanticCache(embedder, store, index, validator=validator, hit_flush_seconds=None)
    after = SemanticCache(embedder, store, index, validator=validator)

    def run(cache: SemanticCache, on: bool) -> Callable[[str], Any]:
        def lookup(text: str) -> Any:
            _direct(embedder, on)
            return cache.lookup(query(text), policy)

        return lookup

    try:
        return _report(
            _interleaved(texts, {"before": run(before, False), "after": run(after, True)})
        )
    finally:
        _direct(embedder, True)
        after.close()
