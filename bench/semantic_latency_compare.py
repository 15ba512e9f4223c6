"""Issue 15 before/after of the lookup, interleaved in one run (``semantic_latency.py
--before-after``).

*before*: ``SentenceTransformer.encode`` for the one question (tokenized twice: once
for the length check) and one hit-count write per hit inside the lookup; *after*: the
embedder's direct forward (``Embedder._forward``) and hit counts written in batches by
a background thread (``semantic.hit_counter``); the direct forward runs in ONNX Runtime
where the embedder has it (``--backend-compare`` isolates that: torch vs ONNX, both
direct, batched hit counts in both). Each text is looked up once through a
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


Toggle = Callable[[bool], None]  # False: the "before" path, True: the "after" one


def _compare_embeds(embedder: Embedder, use: Toggle, texts: Sequence[str]) -> dict[str, Any]:
    def run(on: bool) -> Callable[[str], Any]:
        def embed(text: str) -> Any:
            use(on)
            return embedder.embed([text])

        return embed

    try:
        return _report(_interleaved(texts, {"before": run(False), "after": run(True)}))
    finally:
        use(True)


def _compare_lookups(
    before: SemanticCache,
    after: SemanticCache,
    use: Toggle,
    policy: SemanticPolicy,
    texts: Sequence[str],
) -> dict[str, Any]:
    """Each text looked up through both caches, alternating; closes both."""

    def run(cache: SemanticCache, on: bool) -> Callable[[str], Any]:
        def lookup(text: str) -> Any:
            use(on)
            return cache.lookup(query(text), policy)

        return lookup

    try:
        return _report(
            _interleaved(texts, {"before": run(before, False), "after": run(after, True)})
        )
    finally:
        use(True)
        before.close()
        after.close()


def _direct_toggle(embedder: Embedder) -> Toggle:
    """``encode`` (False) vs the embedder's direct forward (True)."""

    def use(on: bool) -> None:
        embedder._direct = on

    return use


def embed_before_after(embedder: Embedder, texts: Sequence[str]) -> dict[str, Any]:
    """One question embedded through ``encode`` vs the direct forward."""
    return _compare_embeds(embedder, _direct_toggle(embedder), texts)


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
    return _compare_lookups(before, after, _direct_toggle(embedder), policy, texts)


def _onnx_toggle(embedder: Embedder) -> Toggle | None:
    """Switches the embedder between its torch forward (False) and its ONNX Runtime
    forward (True); None when it has no ONNX forward to compare."""
    forward = getattr(embedder, "_onnx", None)
    if forward is None:
        return None

    def use(on: bool) -> None:
        embedder._onnx = forward if on else None

    return use


def embed_backends(embedder: Embedder, texts: Sequence[str]) -> dict[str, Any] | None:
    """One question embedded by the torch forward (before) vs ONNX Runtime (after)."""
    use = _onnx_toggle(embedder)
    return None if use is None else _compare_embeds(embedder, use, texts)


def lookup_backends(
    embedder: Embedder,
    store: EntryStore,
    index: PartitionedIndex,
    validator: Any,
    policy: SemanticPolicy,
    texts: Sequence[str],
) -> dict[str, Any] | None:
    """Whole lookups, the embedding by torch (before) vs ONNX Runtime (after), through
    two caches of the same kind over the same index (each embeds every text once)."""
    use = _onnx_toggle(embedder)
    if use is None:
        return None
    before = SemanticCache(embedder, store, index, validator=validator)
    after = SemanticCache(embedder, store, index, validator=validator)
    return _compare_lookups(before, after, use, policy, texts)
