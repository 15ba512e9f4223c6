"""Timing helpers of the semantic-cache latency benchmark, and its table.

``time_each`` times one call per item, ``summary`` turns the samples into
percentiles, ``table`` prints the per-size results. See bench/semantic_latency.py.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tqdm import tqdm


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
            # the JSON keys keep their hnsw_ names; efSearch means something to HNSW only
            is_hnsw = r.get("index_kind", "hnsw") == "hnsw"
            ef_note = f" (efSearch {r['hnsw_ef_search_default']})" if is_hnsw else ""
            lines.append(
                f"at {r['entries']:,}: exact flat search p50 {f['p50_ms']:.2f} ms / p99 "
                f"{f['p99_ms']:.2f} ms; {r.get('index_kind', 'hnsw')} index recall@1 "
                f"{r['hnsw_recall_at_1']:.3f}, recall@5 {r['hnsw_recall_at_5']:.3f}{ef_note}"
            )
            for ef, e in r["hnsw_by_ef_search"].items() if is_hnsw else ():
                lines.append(
                    f"  efSearch {ef}: search p50 {e['search']['p50_ms']:.3f} ms / p99 "
                    f"{e['search']['p99_ms']:.3f} ms, recall@1 {e['recall_at_1']:.3f}, "
                    f"recall@5 {e['recall_at_5']:.3f}"
                )
    return "\n".join(lines)
