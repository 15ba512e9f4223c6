"""Lookup and store latency of the semantic cache with 1k, 10k and 100k entries in
one partition, on this CPU (issue 4, "Speed").

What is measured, per size (all in one partition of a temporary SQLite file):

  lookup        ``SemanticCache.lookup`` end to end: embed the question (one
                question, one thread), FAISS search, fetch the candidates from
                the database, validate (``validators.Validator``, no guards) and,
                on a hit, record it. Held-out real questions (never stored), so
                the sample mixes hits and misses; both are reported.
  search        ``PartitionedIndex.search`` alone (top-5) with precomputed vectors.
  store         ``SemanticCache.store`` of a new question: embed + extract
                entities + upsert + index add; and the gateway's path after a
                miss, which passes the lookup's vector (``embedding=``).
  rebuild       ``SemanticCache.rebuild`` (start-up: every row read back from the
                database into a fresh index).

Filling 100k entries through ``store()`` one by one (each embeds) would take
far too long here, so the entries are written in bulk: real questions
(BANKING77 + CLINC150) are embedded in batches, and past that pool each further
entry reuses a pool question's text and entities with the pool vector plus
Gaussian noise of norm ``--noise`` (then renormalized; 0.25 gives cosine ~0.97
to its source), so every vector is distinct. The rows go into the
``semantic_entries`` table with one SQLAlchemy ``insert`` per 5,000 rows (the
EntryStore API has no bulk insert); a noisy copy gets a distinct question
digest (it is a synthetic duplicate of its source question). The index is then
built the way the gateway builds it at start-up, ``cache.rebuild()``.

At 100k the HNSW index (above ``DEFAULT_APPROX_THRESHOLD`` the index switches
from exact flat search to HNSW) is also compared with an exact flat index over
the same vectors: search time and recall@1/@5.

Parts: bench/semantic_latency_index.py (bulk fill, flat-index comparison),
bench/semantic_latency_timing.py (timing, table); this file holds the command
line and the measurements per size.

Writes bench/results/semantic_latency.json (``--name`` for another stem). Run:
.venv/bin/python bench/semantic_latency.py   (about 4-6 minutes on 2 busy cores)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import RESULTS, environment, write_json
from bench.semantic_common import embed_batches, fits, query, reply
from bench.semantic_data import DATA_DIR, load_banking77, load_clinc150
from bench.semantic_latency_compare import (
    before_after,
    embed_backends,
    embed_before_after,
    lookup_backends,
)
from bench.semantic_latency_index import (
    ANSWER_CHARS,
    TOP_K,
    Filler,
    Precomputed,
    compare_with_flat,
)
from bench.semantic_latency_timing import summary, table, time_each
from migrations.runner import upgrade_database
from semantic import (
    DEFAULT_THRESHOLD,
    Embedder,
    EntryStore,
    LookupResult,
    SemanticCache,
    SemanticPolicy,
    normalize_question,
)
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder, on_routed_scale
from semantic.index import DEFAULT_APPROX_THRESHOLD
from validators import Validator

GOAL_LOOKUP_P50_MS = 10.0  # issue 15: including the embedding, on a quiet machine
GOAL_SEARCH_P50_MS = 2.0


def lookup_with(cache: SemanticCache, policy: SemanticPolicy, text: str) -> LookupResult:
    return cache.lookup(query(text), policy)


def default_threshold() -> tuple[float, str]:
    path = RESULTS / "semantic_eval.json"
    try:
        return float(json.loads(path.read_text())["choice"]["threshold"]), str(path)
    except (OSError, KeyError, ValueError, TypeError):
        return DEFAULT_THRESHOLD, "semantic.policy.DEFAULT_THRESHOLD"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    ap.add_argument("--pool", type=int, default=6_000, help="real questions embedded")
    ap.add_argument("--lookups", type=int, default=200, help="timed lookups per size")
    ap.add_argument("--stores", type=int, default=100, help="timed stores per size and kind")
    ap.add_argument("--searches", type=int, default=1_000, help="timed index searches per size")
    ap.add_argument("--noise", type=float, default=0.25)
    ap.add_argument("--threshold", type=float, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR)
    ap.add_argument(
        "--before-after",
        action="store_true",
        help="also time each lookup text interleaved through the issue-15 'before' path "
        "(encode, one hit-count write per hit) and the current one",
    )
    ap.add_argument(
        "--backend-compare",
        action="store_true",
        help="also time each lookup text interleaved with the embedder's torch forward "
        "(before) and its ONNX Runtime forward (after), alone and in whole lookups",
    )
    ap.add_argument(
        "--embedder",
        choices=("minilm", "auto"),
        default="minilm",
        help="what the cache embeds with: MiniLM, or CACHEGATE_EMBEDDER=auto (MiniLM for "
        "these English questions, on the routed scale in a 769-d index; the threshold is "
        "put on that scale as the gateway does)",
    )
    ap.add_argument("--name", default="semantic_latency", help="results/<name>.json")
    args = ap.parse_args()
    if args.embedder == "auto" and (args.before_after or args.backend_compare):
        ap.error("--before-after and --backend-compare time MiniLM alone")
    started = time.perf_counter()
    load_start = list(os.getloadavg())
    if args.threshold is None:
        args.threshold, threshold_source = default_threshold()
    else:
        threshold_source = "--threshold"
    embedder = Embedder()
    # What the cache embeds with (its vectors, its partitions); MiniLM itself for the
    # token counts and the before/after comparisons.
    emb: Embedder | RoutedEmbedder = embedder
    if args.embedder == "auto":
        emb = RoutedEmbedder(embedder, E5Embedder())
        args.threshold = on_routed_scale(args.threshold)
    policy = SemanticPolicy(threshold=args.threshold, top_k=TOP_K)
    validator = Validator()
    questions = load_banking77(args.data_dir) + load_clinc150(args.data_dir)
    texts = [q.text for q in fits(embedder, questions)]
    random.Random(args.seed).shuffle(texts)
    # One entry per normalized question: the two datasets share a few questions.
    unique: dict[str, str] = {}
    for text in texts:
        unique.setdefault(normalize_question(text), text)
    texts = list(unique.values())
    n_sizes = len(args.sizes)
    warmup = 10
    pool_texts = texts[: args.pool]
    rest = iter(texts[args.pool :])
    lookup_texts = [next(rest) for _ in range(args.lookups + warmup)]
    store_texts = [[next(rest) for _ in range(2 * args.stores)] for _ in range(n_sizes)]
    t0 = time.perf_counter()
    all_vecs = embed_batches(
        emb,
        pool_texts + lookup_texts + [t for group in store_texts for t in group],
    )
    embed_pool_s = time.perf_counter() - t0
    pool_vecs = all_vecs[: len(pool_texts)]
    lookup_vecs = all_vecs[len(pool_texts) : len(pool_texts) + len(lookup_texts)]
    store_vecs = all_vecs[len(pool_texts) + len(lookup_texts) :]
    t0 = time.perf_counter()
    entities = [validator.extract(t) for t in pool_texts]
    extract_s = time.perf_counter() - t0

    # Embedding alone, for the breakdown (independent of the index size).
    embed_times, _ = time_each(lookup_texts, lambda t: emb.embed([t]), "embed one")
    extract_times, _ = time_each(lookup_texts, validator.extract, "extract one")
    embed_compared = embed_before_after(embedder, lookup_texts) if args.before_after else None
    embed_backend = embed_backends(embedder, lookup_texts) if args.backend_compare else None
    if embed_backend is not None:
        print(
            f"embed one, torch -> onnx (interleaved): {embed_backend['before']['p50_ms']:.2f}"
            f" -> {embed_backend['after']['p50_ms']:.2f} ms p50"
            f" (x{embed_backend['after_over_before_p50']})",
            flush=True,
        )

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/semantic_latency.db"
        upgrade_database(url)
        store = EntryStore(url)
        partition = query("x").partition_key(emb.embedder_id)
        filler = Filler(
            store,
            emb.embedder_id,
            partition,
            pool_texts,
            pool_vecs,
            entities,
            args.noise,
            args.seed,
        )
        cache = SemanticCache(emb, store, validator=validator)
        for size_i, size in enumerate(sorted(args.sizes)):
            print(f"\n== {size:,} entries ==", flush=True)
            insert_s = filler.fill(max(0, size - store.count(partition_key=partition)))
            t0 = time.perf_counter()
            indexed = cache.rebuild(progress=True)
            rebuild_s = time.perf_counter() - t0
            index = cache.index.get(partition)
            assert index is not None
            kind = index.kind

            for text in lookup_texts[:warmup]:
                cache.lookup(query(text), policy)
            timed_texts = lookup_texts[warmup:]
            lookup_ms, outcomes = time_each(
                timed_texts, lambda t: cache.lookup(query(t), policy), "lookup"
            )
            reasons = Counter("hit" if r.hit else str(r.reason) for r in outcomes)
            # The same lookups with the vectors looked up in a table: search + database
            # + validator + hit bookkeeping, without the model.
            no_model = SemanticCache(
                Precomputed(emb, dict(zip(lookup_texts, lookup_vecs, strict=True))),
                store,
                cache.index,
                validator=validator,
            )
            no_embed_ms, no_embed_out = time_each(
                timed_texts, partial(lookup_with, no_model, policy), "lookup (no model)"
            )
            compared = (
                before_after(embedder, store, cache.index, validator, policy, timed_texts)
                if args.before_after
                else None
            )
            backends = (
                lookup_backends(embedder, store, cache.index, validator, policy, timed_texts)
                if args.backend_compare
                else None
            )
            hit_ms = [ms for ms, r in zip(lookup_ms, outcomes, strict=True) if r.hit]
            miss_ms = [ms for ms, r in zip(lookup_ms, outcomes, strict=True) if not r.hit]

            qv = lookup_vecs[warmup:]
            search_items = [qv[i % len(qv)] for i in range(args.searches)]
            search_ms, _ = time_each(
                search_items, lambda v: cache.index.search(partition, v, TOP_K), "search"
            )

            extra: dict[str, Any] = {}
            if index.kind != "flat":
                extra = compare_with_flat(cache, partition, filler, qv, emb.dim)

            group = store_texts[size_i]
            group_vecs = store_vecs[size_i * 2 * args.stores : (size_i + 1) * 2 * args.stores]
            store_ms, stored = time_each(
                group[: args.stores],
                lambda t: cache.store(query(t), reply(t, ANSWER_CHARS), policy),
                "store",
            )
            pairs = list(zip(group[args.stores :], group_vecs[args.stores :], strict=True))
            store_vec_ms, stored_vec = time_each(
                pairs,
                lambda p: cache.store(
                    query(p[0]), reply(p[0], ANSWER_CHARS), policy, embedding=p[1]
                ),
                "store (embedding given)",
            )
            created = sum(r.created for r in stored + stored_vec)
            results.append(
                {
                    "entries": indexed,
                    "target_size": size,
                    "index_kind": kind,
                    "bulk_insert_s": round(insert_s, 2),
                    "rebuild_s": round(rebuild_s, 2),
                    "lookup": {**summary(lookup_ms), "outcomes": dict(reasons)},
                    "lookup_hits": summary(hit_ms),
                    "lookup_misses": summary(miss_ms),
                    "lookup_without_embedding": summary(no_embed_ms),
                    "lookup_before_after": compared,
                    "lookup_torch_vs_onnx": backends,
                    "lookup_without_embedding_hits": summary(
                        [ms for ms, r in zip(no_embed_ms, no_embed_out, strict=True) if r.hit]
                    ),
                    "search_only": summary(search_ms),
                    "store_with_embedding_step": summary(store_ms),
                    "store_embedding_given": summary(store_vec_ms),
                    "stores_created": created,
                    **extra,
                }
            )
            r = results[-1]
            print(
                f"{kind}: lookup p50 {r['lookup']['p50_ms']:.2f} ms, search p50 "
                f"{r['search_only']['p50_ms']:.3f} ms, store p50 "
                f"{r['store_with_embedding_step']['p50_ms']:.2f} ms",
                flush=True,
            )
            if compared is not None:
                print(
                    f"  before/after (interleaved): lookup p50 {compared['before']['p50_ms']:.2f}"
                    f" -> {compared['after']['p50_ms']:.2f} ms"
                    f" (x{compared['after_over_before_p50']}), load {compared['loadavg']}",
                    flush=True,
                )
            if backends is not None:
                print(
                    f"  torch -> onnx (interleaved): lookup p50 {backends['before']['p50_ms']:.2f}"
                    f" -> {backends['after']['p50_ms']:.2f} ms"
                    f" (x{backends['after_over_before_p50']}), load {backends['loadavg']}",
                    flush=True,
                )
        store.close()

    largest = results[-1]
    goals = {
        "lookup_p50_ms_at_largest": largest["lookup"]["p50_ms"],
        "lookup_p50_goal_ms": GOAL_LOOKUP_P50_MS,
        "lookup_goal_met": largest["lookup"]["p50_ms"] <= GOAL_LOOKUP_P50_MS,
        "search_p50_ms_at_largest": largest["search_only"]["p50_ms"],
        "search_p50_goal_ms": GOAL_SEARCH_P50_MS,
        "search_goal_met": largest["search_only"]["p50_ms"] <= GOAL_SEARCH_P50_MS,
        "largest_entries": largest["entries"],
    }
    print()
    print(table(results, summary(embed_times)))
    print()
    for key, value in goals.items():
        print(f"  {key}: {value}")
    total = time.perf_counter() - started
    write_json(
        args.name,
        {
            "benchmark": "semantic_latency",
            "environment": {
                **environment(),
                "load_average_at_start": load_start,
                "load_average_at_end": list(os.getloadavg()),
            },
            "config": {
                **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                "threshold_source": threshold_source,
                "top_k": TOP_K,
                "embedder_id": emb.embedder_id,
                "index_dim": emb.dim,
                "embedder_cpu_threads": embedder.cpu_threads,
                "approx_threshold": DEFAULT_APPROX_THRESHOLD,
                "validator": "validators.Validator(), no guards",
                "database": "SQLite file (WAL) in a temporary directory",
                "fill": "pool of real questions embedded in batches; beyond the pool, "
                "pool vectors + Gaussian noise of norm --noise, renormalized, same text and "
                "entities, distinct digest; bulk SQLAlchemy insert, then cache.rebuild()",
            },
            "pool": {
                "real_questions": len(pool_texts),
                "embed_seconds": round(embed_pool_s, 1),
                "texts_embedded": len(all_vecs),
                "extract_seconds": round(extract_s, 1),
            },
            "embed_one_question": summary(embed_times),
            "embed_one_before_after": embed_compared,
            "embed_one_torch_vs_onnx": embed_backend,
            "embedder_backend": embedder.backend,
            "extract_one_question": summary(extract_times),
            "sizes": results,
            "goals": goals,
            "total_seconds": round(total, 1),
        },
    )
    print(f"total {total:.0f} s")


if __name__ == "__main__":
    main()
