"""Decode tokens/s of the paged model vs context length and batch size, per backend.

One decode step = one forward of S sequences with one new token each, every
sequence attending over its own ``context`` tokens in the paged KV cache
(distinct, shuffled blocks per sequence: nothing shared, the worst case for the
read). ``--shared-prefix N`` makes the first N tokens (whole blocks) the same
physical blocks for every sequence, as a cached system prompt is in serving.
The K/V contents are random; attention's cost does not depend on them.

The decode backends of prefix/model/decode_attention.py run in the same
process, interleaved step by step, so machine load hits them alike; the first
of ``--backends`` is compared with each other one. Default: ``paged`` (the
engine's path) against ``sdpa``, the previous one. ``native`` is ``paged`` with the
native kernels of prefix/kernels (the engine's default on AVX512-BF16 CPUs in bf16;
``paged`` alone is then the path without them); with ``--pack`` (the engine's form) it
includes the fused element-wise kernels. The model is the bundled
SmolLM2-135M-Instruct in the engine's default dtype ("auto", resolved and
reported).

    python bench/decode_speed.py                          # the grid, JSON + PNG
    python bench/decode_speed.py --profile LABEL --backends sdpa  # torch.profiler
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

from bench._common import RESULTS, environment, write_json
from prefix.kernels.flash_attention import FlashAttention
from prefix.kernels.fused_ops import FusedOps
from prefix.model.dtype import cpu_flags, dtype_name, resolve_dtype
from prefix.model.forward_batch import ForwardBatch
from prefix.model.kv_cache import PagedKVCache
from prefix.model.llama import LlamaModel
from prefix.model.loader import LoadedModel, default_model_path, load_model

BLOCK = 16


class DecodeState:
    """A KV cache holding ``batch`` sequences of ``context`` tokens, ready to decode."""

    def __init__(
        self, loaded: LoadedModel, batch: int, context: int, steps: int, shared: int = 0
    ) -> None:
        shared_blocks = min(shared, context) // BLOCK  # whole blocks only, as the cache shares
        blocks_each = -(-(context + steps) // BLOCK) - shared_blocks  # ceil, minus shared
        num_blocks = shared_blocks + batch * blocks_each
        self.cache = PagedKVCache.for_model(
            loaded.config, BLOCK, num_blocks=num_blocks, dtype=loaded.dtype
        )
        self.cache.kv.normal_()
        gen = torch.Generator().manual_seed(batch * 100_003 + context)
        order = torch.randperm(num_blocks, generator=gen)
        common = order[:shared_blocks].tolist()
        # [batch*blocks_each] -> [batch, blocks_each]: each sequence's own shuffled blocks
        own = order[shared_blocks:].view(batch, blocks_each).tolist()
        self.tables = [common + blocks for blocks in own]
        self.tokens = torch.randint(100, loaded.config.vocab_size, (batch,), generator=gen)
        self.batch, self.context = batch, context

    def step(self, model: LlamaModel, i: int) -> float:
        """Decode the token at position ``context + i`` of every sequence; seconds."""
        started = time.perf_counter()
        fb = ForwardBatch.for_decode(
            self.tokens.tolist(), [self.context + i] * self.batch, self.tables, BLOCK
        )
        model(fb, self.cache)
        return time.perf_counter() - started


_KERNEL: list[FlashAttention] = []


def use_backend(model: LlamaModel, backend: str) -> None:
    """Set a decode backend; "native" = "paged" with the native kernels (attention and
    the fused element-wise steps, which need the packed model: see --pack)."""
    if backend == "native" and not _KERNEL:
        _KERNEL.append(FlashAttention.load(cpu_flags()))
    native = backend == "native"
    model.flash_attention = _KERNEL[0] if native else None
    model.fused_ops = FusedOps(_KERNEL[0].library) if native else None
    model.decode_backend = "paged" if native else backend


def measure(
    loaded: LoadedModel,
    batch: int,
    context: int,
    steps: int,
    backends: list[str],
    shared: int = 0,
) -> list[dict[str, Any]]:
    state = DecodeState(loaded, batch, context, steps + 1, shared)
    times: dict[str, list[float]] = {b: [] for b in backends}
    for i in range(steps + 1):  # step 0 warms up each backend
        for backend in backends:  # interleaved: both see the same load
            use_backend(loaded.model, backend)
            seconds = state.step(loaded.model, i)
            if i:
                times[backend].append(seconds)
    use_backend(loaded.model, "paged")
    rows = []
    for backend, samples in times.items():
        median, best = statistics.median(samples), min(samples)
        rows.append(
            {
                "batch": batch,
                "context": context,
                "backend": backend,
                "shared_prefix": shared,
                "step_ms_median": round(median * 1000, 2),
                "step_ms_min": round(best * 1000, 2),
                "tokens_per_s": round(batch / median, 2),
                "tokens_per_s_best": round(batch / best, 2),
                "samples_ms": [round(s * 1000, 2) for s in samples],
            }
        )
        print(
            f"  batch {batch:>2} context {context:>5} {backend:>6}: "
            f"{batch / median:8.1f} tok/s (median step {median * 1000:7.1f} ms, "
            f"best {best * 1000:7.1f} ms)",
            flush=True,
        )
    return rows


def profile(
    loaded: LoadedModel,
    which: str,
    backend: str,
    batches: list[int],
    steps: int,
    context: int,
    shared: int,
) -> Path:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    use_backend(loaded.model, backend)
    lines = [
        f"decode profile ({which}: backend={backend}), SmolLM2-135M {loaded.dtype}, "
        f"context {context} (shared prefix {shared}), {steps} steps per batch size, "
        f"torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} CPUs",
        "",
    ]
    for batch in batches:
        state = DecodeState(loaded, batch, context, steps + 1, shared)
        state.step(loaded.model, 0)  # warm-up
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            seconds = [state.step(loaded.model, i) for i in range(1, steps + 1)]
        summary = (
            f"batch {batch}: step median {statistics.median(seconds) * 1000:.1f} ms, "
            f"min {min(seconds) * 1000:.1f} ms"
        )
        print(summary, flush=True)
        lines += [summary, prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)]
    use_backend(loaded.model, "paged")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"decode_profile_{which}.txt"
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")
    return path


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_ctx, by_batch) = plt.subplots(1, 2, figsize=(11, 4.2))
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    styles = dict(zip(backends, ["-", "--", ":", "-."], strict=False))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    batches = sorted({r["batch"] for r in rows})
    contexts = sorted({r["context"] for r in rows})
    # one colour per batch (left) / context (right); the backend is the line style
    for ax, key, values, x_key, x_values, label in (
        (by_ctx, "batch", batches, "context", contexts, "context tokens"),
        (by_batch, "context", contexts, "batch", batches, "batch (sequences)"),
    ):
        for color, value in zip(colors, values, strict=False):
            for backend, style in styles.items():
                pts = [r for r in rows if r["backend"] == backend and r[key] == value]
                if pts:
                    ax.plot(
                        [r[x_key] for r in pts],
                        [r["tokens_per_s"] for r in pts],
                        style,
                        color=color,
                        marker="o",
                        label=f"{backend}, {key} {value}",
                    )
        ax.set(xscale="log", yscale="log", xlabel=label, ylabel="decode tokens/s")
        ax.set_xticks(x_values, [str(v) for v in x_values])
        ax.minorticks_off()
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"SmolLM2-135M decode: {' vs '.join(backends)} (solid, dashed, dotted)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--steps", type=int, default=4, help="timed steps per point and backend")
    ap.add_argument(
        "--backends",
        nargs="+",
        default=["paged", "sdpa"],
        help="decode backends; the first is compared with each other one",
    )
    ap.add_argument("--shared-prefix", type=int, default=0, help="tokens every sequence shares")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--pack", action="store_true", help="prepack the linears, as the engine does")
    ap.add_argument(
        "--profile",
        default=None,
        metavar="LABEL",
        help="profile the first of --backends at --profile-context; "
        "writes results/decode_profile_LABEL.txt",
    )
    ap.add_argument("--profile-context", type=int, default=700)
    ap.add_argument("--name", default="decode_speed", help="results/<name>.json and .png")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads; 1 on a shared machine, where every 2-thread OpenMP region "
        "waits for a time slice on a busy core and that wait swamps the work",
    )
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    dtype, reason = resolve_dtype(args.dtype, "cpu")
    print(f"dtype {dtype_name(dtype)} ({reason}); loading SmolLM2 ...", flush=True)
    loaded = load_model(default_model_path(), device="cpu", dtype=dtype, verbose=False)
    if args.pack:
        loaded.model.pack()
    torch.manual_seed(0)
    if args.profile:
        profile(
            loaded,
            args.profile,
            args.backends[0],
            args.batches,
            args.steps,
            args.profile_context,
            args.shared_prefix,
        )
        return
    load_start = list(os.getloadavg())
    rows: list[dict[str, Any]] = []
    points = [(b, c) for b in args.batches for c in args.contexts]
    for n, (batch, context) in enumerate(points, 1):
        print(f"[{n}/{len(points)}] batch {batch}, context {context}", flush=True)
        rows += measure(loaded, batch, context, args.steps, args.backends, args.shared_prefix)
    # the first backend over each other one, per point
    ratios: dict[str, dict[str, dict[str, float]]] = {}
    first = args.backends[0]
    for other in args.backends[1:]:
        label = f"{first}_over_{other}"
        ratios[label] = {}
        for batch, context in points:
            new, old = (
                next(
                    r
                    for r in rows
                    if (r["batch"], r["context"], r["backend"]) == (batch, context, b)
                )
                for b in (first, other)
            )
            ratios[label][f"batch{batch}_ctx{context}"] = {
                "median": round(new["tokens_per_s"] / old["tokens_per_s"], 2),
                "best": round(new["tokens_per_s_best"] / old["tokens_per_s_best"], 2),
            }
        print(f"{first} / {other} tokens/s (median steps):")
        for key, r in ratios[label].items():
            print(f"  {key:>18}: {r['median']:.2f}x (best steps {r['best']:.2f}x)")
    write_json(
        args.name,
        {
            "bench": "decode_speed",
            "model": loaded.model_id,
            "dtype": dtype_name(dtype),
            "dtype_reason": reason,
            "block_size": BLOCK,
            "shared_prefix": args.shared_prefix,
            "packed": loaded.model.is_packed,
            "steps": args.steps,
            "environment": environment(),
            "threads": torch.get_num_threads(),
            "load_average_start": load_start,
            "load_average": list(os.getloadavg()),
            "rows": rows,
            "ratios": ratios,
        },
    )
    plot(rows, RESULTS / f"{args.name}.png")


if __name__ == "__main__":
    main()
