"""One prefill step of N short suffixes after a cached document: batched vs per sequence.

The step a burst of admissions costs in serving: N requests share a cached
document (the same physical blocks, as the prefix cache shares them) and each
prefills its own short question. ``batch_prefill`` on attends the N chunks in one
SDPA call per layer (prefix/model/prefill_attention.py); off is the previous path,
one gather + mask + SDPA call per sequence per layer. Both run in the same
process, interleaved repeat by repeat, so machine load hits them alike. Decode of
N sequences at the same context is timed beside them as the yardstick (a step a
newly arriving tenant waits behind). The model is the bundled SmolLM2-135M in the
engine's default dtype ("auto", resolved and reported).

    python bench/prefill_batched.py                  # → bench/results/prefill_batched.json
    python bench/prefill_batched.py --sizes 1 8 32 --suffix 20 --document 416
    python bench/prefill_batched.py --native         # + the native kernels' batched call

With ``--native`` (bf16 on an AVX512-BF16 CPU) a third column runs the batched chunks
through ``prefix/kernels/paged_attention.c`` with the fused element-wise kernels (the
engine's default there; the model is packed as the engine runs it), and the decode
yardstick uses the kernels too; the other two columns stay on SDPA and torch ops.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import environment, write_json
from prefix.kernels.fused_ops import FusedOps
from prefix.model.dtype import dtype_name, resolve_dtype
from prefix.model.forward_batch import ForwardBatch, SeqChunk
from prefix.model.kv_cache import PagedKVCache
from prefix.model.loader import default_model_path, load_model

BLOCK = 16


def _tokens(n: int, gen: torch.Generator) -> list[int]:
    return torch.randint(100, 20000, (n,), generator=gen).tolist()


def measure(
    model: Any,
    n: int,
    document: int,
    suffix: int,
    repeats: int,
    gen: torch.Generator,
    kernel: Any = None,
) -> dict[str, Any]:
    """Median ms of one prefill step (batched and per-sequence) and one decode step."""
    doc_blocks = document // BLOCK
    per_seq = -(-(document + suffix + 1) // BLOCK) - doc_blocks
    cache = PagedKVCache.for_model(
        model.config, BLOCK, num_blocks=doc_blocks + n * per_seq + 1, dtype=model.dtype
    )
    shared = list(range(doc_blocks))
    model(ForwardBatch.for_prefill(_tokens(document, gen), 0, shared, BLOCK), cache)
    tables = [
        shared + list(range(doc_blocks + i * per_seq, doc_blocks + (i + 1) * per_seq))
        for i in range(n)
    ]
    prefill = ForwardBatch.from_chunks(
        [SeqChunk(_tokens(suffix, gen), document, t) for t in tables], BLOCK
    )
    decode = ForwardBatch.for_decode(_tokens(n, gen), [document + suffix] * n, tables, BLOCK)
    names = ["batched", "per_sequence", "decode"] + (["native"] if kernel is not None else [])
    samples: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(repeats + 1):  # the first round warms up, not counted
        for name in samples:
            model.batch_prefill = name != "per_sequence"
            native = kernel is not None and name in ("native", "decode")
            model.flash_attention = kernel if native else None
            model.fused_ops = FusedOps(kernel.library) if native else None
            t0 = time.perf_counter()
            model(decode if name == "decode" else prefill, cache)
            samples[name].append((time.perf_counter() - t0) * 1000)
    model.batch_prefill = True
    model.flash_attention = model.fused_ops = None
    row = {k: round(statistics.median(v[1:]), 1) for k, v in samples.items()}
    result = {
        "num_seqs": n,
        "prefill_batched_ms": row["batched"],
        "prefill_per_sequence_ms": row["per_sequence"],
        "speedup": round(row["per_sequence"] / row["batched"], 2),
        "decode_ms": row["decode"],
    }
    if kernel is not None:
        result["prefill_native_ms"] = row["native"]
        result["native_speedup_over_batched"] = round(row["batched"] / row["native"], 2)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16, 32])
    p.add_argument("--document", type=int, default=416, help="cached tokens (whole blocks)")
    p.add_argument("--suffix", type=int, default=20, help="new tokens per sequence")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--out", default="prefill_batched")
    p.add_argument("--native", action="store_true", help="add the native kernels' column")
    args = p.parse_args(argv)
    dtype, reason = resolve_dtype(args.dtype, torch.device("cpu"))
    print(f"dtype {dtype_name(dtype)} ({reason}); loading the model ...", flush=True)
    loaded = load_model(default_model_path(), device="cpu", dtype=dtype, verbose=False)
    kernel = None
    if args.native:
        from prefix.kernels.flash_attention import FlashAttention
        from prefix.model.dtype import cpu_flags

        loaded.model.pack()  # as the engine runs it
        kernel = FlashAttention.load(cpu_flags())
    gen = torch.Generator().manual_seed(0)
    rows = []
    for i, n in enumerate(args.sizes, 1):
        print(f"[{i}/{len(args.sizes)}] {n} suffixes of {args.suffix} tokens ...", flush=True)
        rows.append(measure(loaded.model, n, args.document, args.suffix, args.repeats, gen, kernel))
        print(f"  {rows[-1]}", flush=True)
    native = " native | native / batched |" if kernel is not None else ""
    print(f"| suffixes | per sequence | batched | speedup |{native} decode step (same batch) |")
    print("|---|---|---|---|" + ("---|---|" if kernel is not None else "") + "---|")
    for r in rows:
        extra = (
            f" {r['prefill_native_ms']:.0f} ms | {r['native_speedup_over_batched']:.2f}x |"
            if kernel is not None
            else ""
        )
        print(
            f"| {r['num_seqs']} | {r['prefill_per_sequence_ms']:.0f} ms | "
            f"{r['prefill_batched_ms']:.0f} ms | {r['speedup']:.2f}x |{extra} "
            f"{r['decode_ms']:.0f} ms |"
        )
    env = environment() | {"loadavg": list(os.getloadavg()), "dtype": dtype_name(dtype)}
    spec = {"document": args.document, "suffix": args.suffix, "repeats": args.repeats}
    write_json(args.out, {"environment": env, "spec": spec, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
