"""Lookup latency with the pair verifier on the hit path, at 100k entries (issue 12).

The same set-up as bench/semantic_latency.py (its bulk filler: real BANKING77 +
CLINC150 questions, then noisy copies of their vectors up to the size, one
partition of a temporary SQLite file, the index built by ``cache.rebuild()``),
and ``SemanticCache.lookup`` of held-out real questions timed three ways:

  off        the old default path: cosine >= 0.89, entity validator
  verifier   the new default path: cosine >= the retrieval threshold of the
             embedder (gateway/verification.py), validator, then the shipped
             verifier on every accepted candidate of the top 5, in one batch,
             served only above the cut of the default target (0.01)
  verifier only   the verifier's ``scores`` call alone on those lookups'
             candidates (one query, up to 5 candidates)

The noisy copies make the worst case for the verifier: nearly every lookup has
five candidates above the retrieval threshold, all scored. The lookups run with
the verdict cache off (``verifier``: every pair is a forward), then again with it
on, twice (``verifier_cache_repeat``: the second pass is what a repeated
question costs).

``--forward`` measures the model alone instead (no index; BANKING77 pairs), and
writes bench/results/verifier_latency_forward.json:

  forward      ms per pair at batch 1, 5 and 32: one batch padded to its longest
               pair (the old forward) against the rows sorted by length in chunks
               of ``FORWARD_CHUNK`` (the new one), in float32, bfloat16 (autocast;
               every weight cast; the linear layers only, which is
               ``CACHEGATE_VERIFIER_DTYPE=bfloat16``) and int8 dynamic quantization
               (torch's, and ONNX Runtime's graph in chunks and, as it serves since
               session 31, one pair a forward: ``int8_onnx_rows_of_1``)
  score_drift_vs_fp32   each variant's score differences from float32 over 600
               pairs, and the decisions flipped at the default cut
  concurrent   ``--clients`` threads each verifying a 5-candidate lookup at once,
               through the batcher, and one at a time (``max_batch=1``: the old
               lock): lookups/s and per-lookup latency

    .venv/bin/python bench/verifier_latency.py [--size 100000] [--lookups 200]
    .venv/bin/python bench/verifier_latency.py --forward [--clients 8]

Writes bench/results/verifier_latency.json (``--dtype bfloat16``: _bf16.json, ``int8``:
_int8.json;
``--forward``: _forward.json; ``--name NAME``: NAME.json, either way).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import environment, write_json
from bench.semantic_common import embed_batches, fits, query
from bench.semantic_data import DATA_DIR, load_banking77, load_clinc150
from bench.semantic_latency_index import TOP_K, Filler
from bench.semantic_latency_timing import summary, time_each
from gateway.verification import load_verifier, retrieval_threshold_for
from migrations.runner import upgrade_database
from semantic import (
    Embedder,
    EntryStore,
    LookupResult,
    SemanticCache,
    SemanticPolicy,
    normalize_question,
)
from semantic.question_vectors import QuestionVectors
from validators import Validator
from validators.verifier import DEFAULT_TARGET_MISFIRE
from validators.verifier_dtype import DTYPES

GOAL_P50_MS = 20.0


def lookup(cache: SemanticCache, policy: SemanticPolicy, text: str) -> LookupResult:
    return cache.lookup(query(text), policy)


def forward_main(args: argparse.Namespace) -> None:
    from bench.verifier_latency_forward import run

    load_start = list(os.getloadavg())
    out = run(args.threads, args.clients, args.seed)
    out["load_average"] = {"start": load_start, "end": list(os.getloadavg())}
    out["environment"] = environment()
    write_json(args.name or "verifier_latency_forward", out)
    print(f"load average start {load_start}, end {out['load_average']['end']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--pool", type=int, default=6_000)
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the verifier")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--forward", action="store_true", help="the model alone (no index)")
    ap.add_argument("--dtype", choices=DTYPES, default="float32", help="of the verifier")
    ap.add_argument("--clients", type=int, default=8, help="concurrent lookups (--forward)")
    ap.add_argument(
        "--name", help="results/<name>.json (default: verifier_latency[_dtype], or _forward)"
    )
    args = ap.parse_args()
    if args.forward:
        return forward_main(args)
    load_start = list(os.getloadavg())
    embedder = Embedder(cpu_threads=1, progress=False)
    validator = Validator()
    verifier = load_verifier(args.threads, cache_size=0, dtype=args.dtype)  # every pair a forward
    cached = load_verifier(args.threads, cache_size=10_000, dtype=args.dtype)
    cut = verifier.shipped_cut(DEFAULT_TARGET_MISFIRE)
    retrieval = retrieval_threshold_for(embedder.embedder_id)
    texts = [q.text for q in fits(embedder, load_banking77(DATA_DIR) + load_clinc150(DATA_DIR))]
    random.Random(args.seed).shuffle(texts)
    unique: dict[str, str] = {}
    for text in texts:
        unique.setdefault(normalize_question(text), text)
    texts = list(unique.values())
    pool, held_out = texts[: args.pool], texts[args.pool : args.pool + args.lookups + 10]
    pool_vecs = embed_batches(embedder, pool)
    entities = [validator.extract(t) for t in pool]
    policies = {
        "off": SemanticPolicy(threshold=0.89, top_k=TOP_K),
        "verifier": SemanticPolicy(threshold=retrieval, top_k=TOP_K, verifier_cut=cut),
    }
    out: dict[str, Any] = {
        "size": args.size,
        "retrieval_threshold": retrieval,
        "verifier_cut": cut,
        "verifier_threads": args.threads,
        "verifier_dtype": args.dtype,
    }
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/verifier_latency.db"
        upgrade_database(url)
        store = EntryStore(url)
        partition = query("x").partition_key(embedder.embedder_id)
        Filler(store, embedder.embedder_id, partition, pool, pool_vecs, entities, 0.25, 0).fill(
            args.size
        )
        cache = SemanticCache(embedder, store, validator=validator, verifier=verifier)
        out["entries"] = cache.rebuild(progress=True)
        for name, policy in policies.items():
            # Each path embeds its questions afresh: with the cache's question vectors kept
            # from the path before, the second one measured no embedding at all.
            cache.vectors = QuestionVectors(embedder)
            for text in held_out[:10]:  # warm-up
                cache.lookup(query(text), policy)
            ms, results = time_each(held_out[10:], partial(lookup, cache, policy), name)
            outcomes = Counter("hit" if r.hit else str(r.reason) for r in results)
            out[name] = summary(ms) | {"outcomes": dict(outcomes)}
        cache.verifier = cached
        cache.vectors = QuestionVectors(embedder)  # first: nothing remembered; repeat: all
        verified = partial(lookup, cache, policies["verifier"])
        for name in ("verifier_cache_first", "verifier_cache_repeat"):
            ms, results = time_each(held_out[10:], verified, name)
            outcomes = Counter("hit" if r.hit else str(r.reason) for r in results)
            out[name] = summary(ms) | {"outcomes": dict(outcomes)}
        out["verdict_cache"] = {
            "hits": cached.model.cache.hits,
            "misses": cached.model.cache.misses,
        }
        # The verifier's own call on the candidates those lookups met.
        calls = []
        for text in held_out[10:]:
            found = cache.index.search(partition, embedder.embed([text])[0], TOP_K)
            rows = store.get_many(i for i, s in found if s >= retrieval)
            if rows:
                calls.append((text, [r.question for r in rows.values()]))
        ms, _ = time_each(calls, lambda c: verifier.scores(c[0], c[1]), "verifier only")
        out["verifier_only"] = summary(ms) | {
            "mean_candidates": round(sum(len(c[1]) for c in calls) / max(1, len(calls)), 2),
            # The filler's noisy copies repeat question texts; a repeated pair within one
            # call is scored once.
            "mean_distinct_candidates": round(
                sum(len(set(c[1])) for c in calls) / max(1, len(calls)), 2
            ),
        }
        store.close()
    out["goal_p50_ms"] = GOAL_P50_MS
    out["load_average"] = {"start": load_start, "end": list(os.getloadavg())}
    out["environment"] = environment()
    suffix = {"float32": "", "bfloat16": "_bf16"}.get(args.dtype, f"_{args.dtype}")
    write_json(args.name or "verifier_latency" + suffix, out)
    for name in ("off", "verifier", "verifier_cache_repeat", "verifier_only"):
        s = out[name]
        print(
            f"{name:14} p50 {s['p50_ms']:.1f} ms  p90 {s['p90_ms']:.1f} ms  {s.get('outcomes', '')}"
        )
    print(f"load average start {load_start}, end {out['load_average']['end']}")


if __name__ == "__main__":
    main()
