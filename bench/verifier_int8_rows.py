"""The English int8 verifier one row per forward against rows sharing a forward, in
one run (validators/verifier_en.py ``INT8_FORWARD_CHUNK``).

ONNX Runtime quantizes the int8 graph's activations per tensor, with one scale for
the whole batch, so a pair scored beside other pairs gets another score than alone.
This bench measures what that costs and what scoring each pair alone costs:

* **dependence**: ``--pairs`` random BANKING77 pairs, each scored alone and as the
  first of five pairs in one forward (four other random pairs), in int8 and, as the
  control, in float32, and in bfloat16 where the CPU computes it natively (it still
  shares forwards, padding moves it): the probability and logit moves and the
  decisions that change at the shipped 1% cut;
* **speed**: ``score(query, 5 distinct candidates)`` calls (as
  bench/verifier_backends.py), verdict cache off, with the rows in chunks of 8 (one
  forward, as before) and one at a time (as served), interleaved call by call.

    .venv/bin/python bench/verifier_int8_rows.py [--calls 60] [--pairs 150]

Writes bench/results/verifier_int8_rows.json.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from bench._common import environment, write_json
from bench.semantic_data import DATA_DIR
from bench.semantic_latency_timing import summary
from bench.verifier_backends import CANDIDATES, lookups
from prefix.model.dtype import resolve_dtype
from validators.verifier import DEFAULT_TARGET_MISFIRE, PairVerifier
from validators.verifier_en import FORWARD_CHUNK

COMPANIONS = 4


def dependence(verifier: PairVerifier, texts: list[str], n: int, seed: int) -> dict[str, Any]:
    """How far a pair's score moves when four other pairs share its forward."""
    rng = random.Random(seed)
    alone, shared = [], []
    for _ in range(n):
        a, b = rng.sample(texts, 2)
        pair = (a, b)
        others = [(c, d) for c, d in (rng.sample(texts, 2) for _ in range(COMPANIONS))]
        alone.append(verifier.verdicts_for_pairs([pair])[0].score)
        shared.append(verifier.verdicts_for_pairs([pair, *others])[0].score)
    x, y = np.asarray(alone), np.asarray(shared)
    cut = verifier.cut_for(DEFAULT_TARGET_MISFIRE)
    moved = np.abs(x - y)
    eps = 1e-12  # a score of exactly 0 or 1 has no finite logit

    def logit(p: np.ndarray) -> np.ndarray:
        p = np.clip(p, eps, 1 - eps)
        return np.log(p / (1 - p))

    logits = np.abs(logit(x) - logit(y))
    return {
        "pairs": n,
        "mean": round(float(moved.mean()), 6),
        "max": round(float(moved.max()), 5),
        "logit_mean": round(float(logits.mean()), 5),
        "logit_max": round(float(logits.max()), 4),
        "decisions_changed_at_cut": int(((x > cut) != (y > cut)).sum()),
        "cut": cut,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=60, help="timed score() calls per variant")
    ap.add_argument("--pairs", type=int, default=150, help="pairs for the dependence check")
    args = ap.parse_args()
    torch.set_num_threads(1)
    started = time.perf_counter()
    with (DATA_DIR / "banking77" / "test.csv").open(newline="", encoding="utf-8") as f:
        texts = [row["text"] for row in csv.DictReader(f)]

    print("loading the verifier in int8 and float32 …", file=sys.stderr, flush=True)
    int8 = PairVerifier(cache_size=0, zh=False, dtype="int8")
    float32 = PairVerifier(cache_size=0, zh=False)
    served_chunk = int8.en.forward_chunk
    out: dict[str, Any] = {"int8_forward_chunk": served_chunk}

    # Dependence: in chunks of 8 (a shared forward) against the served chunk.
    int8.en.forward_chunk = FORWARD_CHUNK
    out["dependence_shared_forward_int8"] = dependence(int8, texts, args.pairs, 0)
    int8.en.forward_chunk = served_chunk
    out["dependence_served_int8"] = dependence(int8, texts, args.pairs, 0)
    out["dependence_float32_control"] = dependence(float32, texts, args.pairs, 0)
    if resolve_dtype("auto", "cpu")[0] == torch.bfloat16:  # native here: measured
        bf16 = PairVerifier(cache_size=0, zh=False, dtype="bfloat16")
        out["dependence_bfloat16"] = dependence(bf16, texts, args.pairs, 0)

    calls = lookups(texts[::7], args.calls)
    int8.score(*calls[0])  # warm-up
    times: dict[str, list[float]] = {"chunks_of_8": [], "one_row_each": []}
    chunk = {"chunks_of_8": FORWARD_CHUNK, "one_row_each": served_chunk}
    for i, (query, candidates) in enumerate(calls):
        for name in list(times) if i % 2 == 0 else list(times)[::-1]:
            int8.en.forward_chunk = chunk[name]
            t0 = time.perf_counter_ns()
            int8.score(query, candidates)
            times[name].append((time.perf_counter_ns() - t0) / 1e6)
    int8.en.forward_chunk = served_chunk
    for name, ms in times.items():
        out[name] = summary(ms)
        out[name]["ms_per_pair_p50"] = round(out[name]["p50_ms"] / CANDIDATES, 2)
    ratio = out["one_row_each"]["p50_ms"] / out["chunks_of_8"]["p50_ms"]
    out["one_row_over_chunks_p50"] = round(ratio, 3)

    print("\n| English int8 | per call p50 / p99 (ms) | per pair p50 (ms) |")
    print("|---|---|---|")
    for name in times:
        r = out[name]
        print(f"| {name} | {r['p50_ms']:.2f} / {r['p99_ms']:.2f} | {r['ms_per_pair_p50']:.2f} |")
    print(f"one row each / chunks of 8: x{out['one_row_over_chunks_p50']}")
    for key in ("dependence_shared_forward_int8", "dependence_served_int8"):
        print(f"{key}: {out[key]}")
    for key in ("dependence_float32_control", "dependence_bfloat16"):
        if key in out:
            print(f"{key}: {out[key]}")
    write_json(
        "verifier_int8_rows",
        {
            "benchmark": "verifier_int8_rows",
            "calls": len(calls),
            "candidates_per_call": CANDIDATES,
            "results": out,
            "seconds": round(time.perf_counter() - started, 1),
            "environment": environment(),
        },
    )


if __name__ == "__main__":
    main()
