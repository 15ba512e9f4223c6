"""One layer's q/k/v and gate/up products, separate vs fused, on SmolLM2's shapes.

vLLM and nano-vllm run q/k/v as one product (QKVParallelLinear) and gate/up as
one (MergedColumnParallelLinear): fewer, wider matrix products. This measures
exactly that change and nothing else, to decide whether our decoder
(prefix/model/llama.py, separate ``q_proj`` … ``up_proj``) should do the same:
for each number of rows (1 = one decoding stream, 8 and 32 = decode batches,
512 = a prefill chunk), the five separate products of one layer against the two
fused ones over the same weights, alternating which runs first, in one process
so machine load hits both alike; median of ``--repeats`` rounds of ``--calls``
calls each. (Whole decode steps, bench/decode_speed.py, vary by more than this
difference from run to run on a shared 2-core box.)

    python bench/fused_projections.py [--threads 1] [--dtype auto]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import environment, write_json
from prefix.model.dtype import dtype_name, resolve_dtype

# SmolLM2-135M: hidden 576, 9 heads and 3 KV heads of 64, intermediate 1,536
HIDDEN, Q, KV, INTER = 576, 9 * 64, 3 * 64, 1536


def _per_call_ms(fn: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 8, 32, 512])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--name", default="fused_projections")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype, reason = resolve_dtype(args.dtype, "cpu")
    print(f"dtype {dtype_name(dtype)} ({reason}), {torch.get_num_threads()} torch threads")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(n, HIDDEN, generator=g).to(dtype) for n in (Q, KV, KV))
    gate, up = (torch.randn(INTER, HIDDEN, generator=g).to(dtype) for _ in range(2))
    qkv, gate_up = torch.cat([q, k, v]), torch.cat([gate, up])
    rows_out = []
    with torch.inference_mode():
        for m in args.rows:
            x = torch.randn(m, HIDDEN, generator=g).to(dtype)

            def separate(x: torch.Tensor = x) -> object:
                return (
                    F.linear(x, q),
                    F.linear(x, k),
                    F.linear(x, v),
                    F.linear(x, gate),
                    F.linear(x, up),
                )

            def fused(x: torch.Tensor = x) -> object:
                a, b, c = F.linear(x, qkv).split([Q, KV, KV], dim=-1)
                gt, u = F.linear(x, gate_up).chunk(2, dim=-1)
                return a, b, c, gt, u

            calls = max(3, args.calls if m <= 32 else args.calls // 10)
            for fn in (separate, fused):
                _per_call_ms(fn, 3)  # warm-up
            sep, fus = [], []
            for r in range(args.repeats):
                # alternate which goes first: the second of a pair finds warmer caches
                if r % 2:
                    fus.append(_per_call_ms(fused, calls))
                    sep.append(_per_call_ms(separate, calls))
                else:
                    sep.append(_per_call_ms(separate, calls))
                    fus.append(_per_call_ms(fused, calls))
            row = {
                "rows": m,
                "separate_ms": round(statistics.median(sep), 4),
                "fused_ms": round(statistics.median(fus), 4),
            }
            row["speedup"] = round(row["separate_ms"] / row["fused_ms"], 3)
            rows_out.append(row)
            print(
                f"rows {m:4d}: separate {row['separate_ms']:.3f} ms, fused "
                f"{row['fused_ms']:.3f} ms per layer -> {row['speedup']:.2f}x",
                flush=True,
            )
    write_json(
        args.name,
        {
            "environment": environment(),
            "dtype": dtype_name(dtype),
            "threads": torch.get_num_threads(),
            "calls": args.calls,
            "repeats": args.repeats,
            "loadavg_end": list(os.getloadavg()),
            "rows": rows_out,
        },
    )


if __name__ == "__main__":
    main()
