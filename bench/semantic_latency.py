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

Writes bench/results/semantic_latency.json. Run:
.venv/bin/python bench/semantic_latency.py   (about 4-6 minutes on 2 busy cores)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import insert
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import RESULTS, environment, write_json
from bench.semantic_pairs import DATA_DIR, load_banking77, load_clinc150
from semantic import (
    DEFAULT_THRESHOLD,
    Embedder,
    EntryStore,
    LookupResult,
    SemanticCache,
    SemanticPolicy,
    SemanticQuery,
    VectorIndex,
    normalize_question,
    upgrade_database,
)
from semantic.index import DEFAULT_APPROX_THRESHOLD
from semantic.models import SemanticEntry
from semantic.question import question_digest
from validators import Validator

GOAL_LOOKUP_P50_MS = 15.0
GOAL_SEARCH_P50_MS = 2.0
TOP_K = 5


def pct(samples: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q)) if samples else float("nan")


def summary(samples: Sequence[float]) -> dict[str, Any]:
    return {
        "n": len(samples),
        "p50_ms": round(pct(samples, 50), 3),
        "p90_ms": round(pct(samples, 90), 3),
        "p99_ms": round(pct(samples, 99), 3),
        "mean_ms": round(statistics.fmean(samples), 3) if samples else None,
        "max_ms": round(max(samples), 3) if samples else None,
    }


def time_each(items: Sequence[Any], fn: Callable[[Any], Any], desc: str) -> tuple[list, list]:
    """Wall time in ms of ``fn(item)`` for each item, and the results."""
    gc.collect()
    times, results = [], []
    for item in tqdm(items, desc=desc, unit="op", leave=False):
        t0 = time.perf_counter_ns()
        results.append(fn(item))
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return times, results


def embed_batches(embedder: Embedder, texts: Sequence[str], batch: int = 256) -> NDArray:
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.empty((len(texts), embedder.dim), dtype=np.float32)
    with tqdm(total=len(texts), desc="embedding pool", unit="text") as bar:
        for lo in range(0, len(order), batch):
            idx = order[lo : lo + batch]
            out[idx] = embedder.embed([texts[i] for i in idx])
            bar.update(len(idx))
    return out


def reply(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"(answer to: {text[:60]})"},
                "finish_reason": "stop",
            }
        ],
    }


def query(text: str) -> SemanticQuery:
    return SemanticQuery(tenant="bench", model="bench-model", question=text)


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
                            "answer": reply(text),
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

    def __init__(self, inner: Embedder, table: dict[str, NDArray[np.float32]]) -> None:
        self.embedder_id = inner.embedder_id
        self.dim = inner.dim
        self.table = table

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return np.stack([self.table[t] for t in texts])


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
    args = ap.parse_args()
    started = time.perf_counter()
    load_start = list(os.getloadavg())
    if args.threshold is None:
        args.threshold, threshold_source = default_threshold()
    else:
        threshold_source = "--threshold"
    policy = SemanticPolicy(threshold=args.threshold, top_k=TOP_K)

    embedder = Embedder()
    validator = Validator()
    questions = load_banking77(args.data_dir) + load_clinc150(args.data_dir)
    texts = [q.text for q in questions]
    counts = embedder.count_tokens(texts)
    texts = [t for t, n in zip(texts, counts, strict=True) if n <= embedder.max_tokens]
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
        embedder,
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
    embed_times, _ = time_each(lookup_texts, lambda t: embedder.embed([t]), "embed one")
    extract_times, _ = time_each(lookup_texts, validator.extract, "extract one")

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/semantic_latency.db"
        upgrade_database(url)
        store = EntryStore(url)
        partition = query("x").partition_key(embedder.embedder_id)
        filler = Filler(
            store,
            embedder.embedder_id,
            partition,
            pool_texts,
            pool_vecs,
            entities,
            args.noise,
            args.seed,
        )
        cache = SemanticCache(embedder, store, validator=validator)
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
                Precomputed(embedder, dict(zip(lookup_texts, lookup_vecs, strict=True))),
                store,
                cache.index,
                validator=validator,
            )
            no_embed_ms, no_embed_out = time_each(
                timed_texts, partial(lookup_with, no_model, policy), "lookup (no model)"
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
                extra = compare_with_flat(cache, partition, filler, qv, embedder.dim)

            group = store_texts[size_i]
            group_vecs = store_vecs[size_i * 2 * args.stores : (size_i + 1) * 2 * args.stores]
            store_ms, stored = time_each(
                group[: args.stores], lambda t: cache.store(query(t), reply(t), policy), "store"
            )
            pairs = list(zip(group[args.stores :], group_vecs[args.stores :], strict=True))
            store_vec_ms, stored_vec = time_each(
                pairs,
                lambda p: cache.store(query(p[0]), reply(p[0]), policy, embedding=p[1]),
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
        "semantic_latency",
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
                "embedder_id": embedder.embedder_id,
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
            "extract_one_question": summary(extract_times),
            "sizes": results,
            "goals": goals,
            "total_seconds": round(total, 1),
        },
    )
    print(f"total {total:.0f} s")


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


def table(results: list[dict[str, Any]], embed: dict[str, Any]) -> str:
    lines = [
        "| entries | index | lookup p50 / p99 (ms) | hits in sample "
        "| lookup without the model p50 / p99 (ms) | search only p50 / p99 (ms) "
        "| store p50 / p99 (ms) | store, embedding given p50 / p99 (ms) | rebuild (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lk, s, ne = r["lookup"], r["search_only"], r["lookup_without_embedding"]
        st, sv = r["store_with_embedding_step"], r["store_embedding_given"]
        hits = r["lookup"]["outcomes"].get("hit", 0)
        lines.append(
            f"| {r['entries']:,} | {r['index_kind']} | {lk['p50_ms']:.2f} / {lk['p99_ms']:.2f} "
            f"| {hits}/{lk['n']} | {ne['p50_ms']:.2f} / {ne['p99_ms']:.2f} "
            f"| {s['p50_ms']:.3f} / {s['p99_ms']:.3f} "
            f"| {st['p50_ms']:.2f} / {st['p99_ms']:.2f} | {sv['p50_ms']:.2f} / {sv['p99_ms']:.2f} "
            f"| {r['rebuild_s']:.1f} |"
        )
    lines.append("")
    lines.append(
        f"embedding one question alone: p50 {embed['p50_ms']:.2f} ms, p99 {embed['p99_ms']:.2f} ms"
    )
    for r in results:
        if "flat_search_same_vectors" in r:
            f = r["flat_search_same_vectors"]
            lines.append(
                f"at {r['entries']:,}: exact flat search p50 {f['p50_ms']:.2f} ms / p99 "
                f"{f['p99_ms']:.2f} ms; HNSW recall@1 {r['hnsw_recall_at_1']:.3f}, "
                f"recall@5 {r['hnsw_recall_at_5']:.3f} (efSearch {r['hnsw_ef_search_default']})"
            )
            for ef, e in r["hnsw_by_ef_search"].items():
                lines.append(
                    f"  efSearch {ef}: search p50 {e['search']['p50_ms']:.3f} ms / p99 "
                    f"{e['search']['p99_ms']:.3f} ms, recall@1 {e['recall_at_1']:.3f}, "
                    f"recall@5 {e['recall_at_5']:.3f}"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
