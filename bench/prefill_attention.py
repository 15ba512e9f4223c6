"""Prefill attention alone: the native bf16 flash kernel against torch's SDPA, one layer.

The shapes are SmolLM2-135M's (9 query heads on 3 KV heads, head dim 64) and the calls
are the engine's: a cold prompt of N tokens (causal over itself; SDPA ``is_causal``) and
a prefix hit of S new tokens over C cached ones (SDPA with a bool mask, the kernel from
the same K/V rows). Both run in one process, interleaved call by call, so machine load
hits them alike. Reported per point: median ms, GFLOPS (causal FLOPs: QK and PV over
the visible keys only), kernel / SDPA speed-up, and each one's max |error| against a
float32 computation on the same bf16 inputs.

    python bench/prefill_attention.py                 # JSON + PNG in bench/results
    python bench/prefill_attention.py --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import RESULTS, environment, write_json
from prefix.kernels.flash_attention import FlashAttention
from prefix.model.dtype import cpu_flags

HEADS, KV_HEADS, DIM = 9, 3, 64
# (new tokens, cached tokens)
POINTS = [(512, 0), (1024, 0), (2048, 0), (4096, 0), (200, 2000), (32, 700), (500, 3500)]


def inputs(new: int, cached: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(new * 7 + cached)
    total = new + cached

    def rand(n: int, h: int) -> torch.Tensor:
        return torch.randn(n, h, DIM, generator=gen).to(torch.bfloat16)

    return rand(new, HEADS), rand(total, KV_HEADS), rand(total, KV_HEADS)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The engine's SDPA call; [new, H, D]."""
    new, total = q.shape[0], k.shape[0]
    mask = None
    if new != total:
        # [new, 1] vs [1, total]: query at absolute p sees keys 0..p
        mask = torch.arange(total)[None, :] <= torch.arange(total - new, total)[:, None]
    # [L, H, D] -> [1, H, L, D]
    out = F.scaled_dot_product_attention(
        q.to(dtype).transpose(0, 1)[None],
        k.to(dtype).transpose(0, 1)[None],
        v.to(dtype).transpose(0, 1)[None],
        attn_mask=mask,
        is_causal=mask is None,
        enable_gqa=True,
    )
    return out[0].transpose(0, 1)  # [1, H, L, D] -> [L, H, D]


def causal_flops(new: int, cached: int) -> float:
    visible = sum(cached + i + 1 for i in range(new))  # keys each query sees
    return 2 * 2 * visible * DIM * HEADS  # QK and PV, a multiply and an add each


def measure(kernel: FlashAttention, new: int, cached: int, repeats: int) -> dict[str, Any]:
    q, k, v = inputs(new, cached)
    out = torch.empty_like(q)

    def native() -> torch.Tensor:
        kernel.attend(q, k, v, out, k.shape[0], None)
        return out

    calls = {"native": native, "sdpa": lambda: sdpa(q, k, v, torch.bfloat16)}
    times: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(repeats + 1):  # call 0 warms up
        for name, fn in calls.items():
            started = time.perf_counter()
            fn()
            if i:
                times[name].append(time.perf_counter() - started)
    exact = sdpa(q, k, v, torch.float32)
    flops = causal_flops(new, cached)
    row: dict[str, Any] = {"new_tokens": new, "cached_tokens": cached}
    for name, fn in calls.items():
        median = statistics.median(times[name])
        row[name] = {
            "ms_median": round(median * 1000, 3),
            "gflops": round(flops / median / 1e9, 1),
            "max_abs_error_vs_fp32": float((fn().float() - exact.float()).abs().max()),
        }
    row["speedup"] = round(row["sdpa"]["ms_median"] / row["native"]["ms_median"], 2)
    return row


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [
        f"{r['new_tokens']}"
        if not r["cached_tokens"]
        else f"{r['new_tokens']}+{r['cached_tokens']}c"
        for r in rows
    ]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(9, 4))
    for offset, name in ((-0.2, "sdpa"), (0.2, "native")):
        ax.bar([i + offset for i in x], [r[name]["ms_median"] for r in rows], 0.4, label=name)
    for i, r in enumerate(rows):
        ax.annotate(
            f"{r['speedup']:.1f}x",
            (i + 0.2, r["native"]["ms_median"]),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(list(x), labels)
    ax.set_xlabel("new tokens (+ cached tokens)")
    ax.set_ylabel("ms per layer (median)")
    ax.set_yscale("log")
    ax.set_title("Prefill attention, SmolLM2 shapes, bf16: native kernel vs SDPA")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--name", default="prefill_attention")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    kernel = FlashAttention.load(cpu_flags())
    rows = []
    for n, (new, cached) in enumerate(POINTS, 1):
        row = measure(kernel, new, cached, args.repeats)
        rows.append(row)
        print(
            f"[{n}/{len(POINTS)}] {new:>5} new + {cached:>5} cached: native "
            f"{row['native']['ms_median']:8.2f} ms ({row['native']['gflops']:6.1f} GFLOPS), "
            f"sdpa {row['sdpa']['ms_median']:8.2f} ms ({row['sdpa']['gflops']:6.1f}), "
            f"{row['speedup']:.2f}x; |err| vs fp32 native "
            f"{row['native']['max_abs_error_vs_fp32']:.4f}, sdpa "
            f"{row['sdpa']['max_abs_error_vs_fp32']:.4f}",
            flush=True,
        )
    write_json(
        args.name,
        {
            "bench": "prefill_attention",
            "shapes": {"heads": HEADS, "kv_heads": KV_HEADS, "head_dim": DIM},
            "threads": torch.get_num_threads(),
            "environment": environment(),
            "rows": rows,
        },
    )
    plot(rows, RESULTS / f"{args.name}.png")


if __name__ == "__main__":
    main()
