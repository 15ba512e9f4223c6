"""Which FAISS index for a big semantic partition: a measured sweep (issue 15, part 4).

Synthetic clustered unit vectors stand in for question embeddings (the embedder is
not what is measured here): subjects (random unit vectors), topics around them
and entries around the topics, each level the level above plus Gaussian noise of
norm ``--noise``, renormalized (1.0: an entry has cosine ~0.5 with another entry
of its topic, ~0.35 with one of a neighbouring topic of its subject, ~0 elsewhere:
about what all-MiniLM-L6-v2 gives questions on one subject and on others).
Queries come from the same generator and are never stored. Ground truth is
exact inner-product search (``IndexFlatIP``).

For each candidate (HNSW at several M / efConstruction, IVF-Flat at several nlist)
the build time is measured once, then the search-time knob (efSearch, nprobe) is
swept without rebuilding: one query at a time on one OpenMP thread (the gateway's
way), p50/p99 latency and recall@1 / recall@5 against the exact top 5.

Writes bench/results/semantic_index_sweep.json. Run (1M takes ~10 minutes on two
busy cores):
.venv/bin/python bench/semantic_index_sweep.py --size 1000000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import write_json
from bench.semantic_latency_timing import summary

DIM = 384
_faiss: Any = faiss


def clustered(n: int, topics: int, noise: float, seed: int, dim: int = DIM) -> NDArray[np.float32]:
    """``n`` unit vectors around ``topics`` centres, themselves grouped around
    ``topics // 50`` subjects (same seed: same centres), so neighbouring topics
    overlap the way questions on one subject do."""
    rng0 = np.random.default_rng(seed)
    subjects = _unit(rng0.standard_normal((max(1, topics // 50), dim)).astype(np.float32))
    centres = subjects[rng0.integers(0, len(subjects), topics)]
    centres = _unit(
        centres + rng0.standard_normal((topics, dim)).astype(np.float32) * (noise / np.sqrt(dim))
    )
    rng = np.random.default_rng(seed + n)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):  # bounded temporaries
        m = min(100_000, n - start)
        block = centres[rng.integers(0, topics, m)]
        block += rng.standard_normal((m, dim)).astype(np.float32) * (noise / np.sqrt(dim))
        out[start : start + m] = _unit(block)
    return out


def _unit(x: NDArray[np.float32]) -> NDArray[np.float32]:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def exact(base: NDArray[np.float32], queries: NDArray[np.float32], k: int) -> NDArray[np.int64]:
    flat = faiss.IndexFlatIP(base.shape[1])
    flat.add(base)
    faiss.omp_set_num_threads(max(1, faiss.omp_get_max_threads()))
    _, ids = flat.search(queries, k)
    return ids


def sweep(index: Any, queries: NDArray[np.float32], truth: NDArray[np.int64], params: Any) -> dict:
    faiss.omp_set_num_threads(1)
    times, found = [], []
    for q in queries:
        t0 = time.perf_counter_ns()
        _, ids = index.search(q.reshape(1, -1), 5, params=params)
        times.append((time.perf_counter_ns() - t0) / 1e6)
        found.append(ids[0])
    got = np.stack(found)
    return {
        "search": summary(times),
        "recall_at_1": round(float(np.mean(got[:, 0] == truth[:, 0])), 4),
        "recall_at_5": round(
            float(np.mean([len(set(a) & set(b)) / 5 for a, b in zip(got, truth, strict=True)])), 4
        ),
    }


def build_hnsw(base: NDArray[np.float32], m: int, ef_c: int) -> tuple[Any, float]:
    faiss.omp_set_num_threads(max(1, faiss.omp_get_max_threads()))
    index = faiss.IndexHNSWFlat(base.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_c
    t0 = time.perf_counter()
    for start in range(0, len(base), 100_000):
        index.add(base[start : start + 100_000])
        print(f"  hnsw M={m} efC={ef_c}: {start + 100_000:,} added", flush=True)
    return index, time.perf_counter() - t0


def build_ivf(base: NDArray[np.float32], nlist: int, seed: int) -> tuple[Any, float]:
    faiss.omp_set_num_threads(max(1, faiss.omp_get_max_threads()))
    t0 = time.perf_counter()
    quantizer = faiss.IndexFlatIP(base.shape[1])
    index = faiss.IndexIVFFlat(quantizer, base.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
    sample = np.random.default_rng(seed).choice(len(base), min(len(base), 40 * nlist), False)
    index.train(base[np.sort(sample)])
    print(f"  ivf nlist={nlist}: trained in {time.perf_counter() - t0:.1f}s", flush=True)
    index.add(base)
    return index, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--topics", type=int, default=0, help="0: size / 50")
    ap.add_argument("--noise", type=float, default=1.0)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--hnsw", nargs="*", default=["32:80"], help="M:efConstruction")
    ap.add_argument("--ef-search", type=int, nargs="+", default=[64, 128, 256, 512])
    ap.add_argument("--ivf", type=int, nargs="*", default=[1024, 4096], help="nlist")
    ap.add_argument("--nprobe", type=int, nargs="+", default=[8, 16, 32, 64, 128])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="semantic_index_sweep")
    args = ap.parse_args()
    load_start = list(os.getloadavg())
    topics = args.topics or max(1, args.size // 50)
    t0 = time.perf_counter()
    base = clustered(args.size, topics, args.noise, args.seed)
    queries = clustered(args.queries, topics, args.noise, args.seed)[: args.queries]
    truth = exact(base, queries, 5)
    print(f"data + exact truth: {time.perf_counter() - t0:.1f}s", flush=True)
    results: list[dict[str, Any]] = []
    flat = faiss.IndexFlatIP(DIM)
    flat.add(base)
    results.append({"index": "flat", "build_s": 0, **sweep(flat, queries[:50], truth[:50], None)})
    del flat
    print(f"flat: {results[-1]['search']['p50_ms']:.1f} ms p50", flush=True)
    for spec in args.ivf:
        index, build_s = build_ivf(base, spec, args.seed)
        for nprobe in args.nprobe:
            row = sweep(index, queries, truth, _faiss.SearchParametersIVF(nprobe=nprobe))
            results.append({"index": f"ivf{spec}", "nprobe": nprobe, "build_s": build_s, **row})
            print(f"ivf nlist={spec} nprobe={nprobe}: {_line(row)}", flush=True)
        del index
    for spec in args.hnsw:
        m, ef_c = (int(x) for x in spec.split(":"))
        index, build_s = build_hnsw(base, m, ef_c)
        for ef in args.ef_search:
            row = sweep(index, queries, truth, _faiss.SearchParametersHNSW(efSearch=ef))
            results.append(
                {
                    "index": f"hnsw{m}",
                    "ef_construction": ef_c,
                    "ef_search": ef,
                    "build_s": build_s,
                    **row,
                }
            )
            print(f"hnsw M={m} efC={ef_c} efS={ef}: {_line(row)}", flush=True)
        del index
    write_json(
        args.out,
        {
            "benchmark": "semantic_index_sweep",
            "config": vars(args) | {"topics": topics, "dim": DIM},
            "load_average_at_start": load_start,
            "load_average_at_end": list(os.getloadavg()),
            "cpu_count": os.cpu_count(),
            "results": results,
        },
    )


def _line(row: dict[str, Any]) -> str:
    return (
        f"p50 {row['search']['p50_ms']:.3f} ms p99 {row['search']['p99_ms']:.3f} ms "
        f"recall@1 {row['recall_at_1']:.3f} @5 {row['recall_at_5']:.3f}"
    )


if __name__ == "__main__":
    main()
