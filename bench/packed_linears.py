"""Packed linear layers (prefix/model/packed_linear.py) against plain ``F.linear``, one run.

Two copies of the bundled SmolLM2-135M in bfloat16 (the engine's ``auto`` on a
CPU with AMX / AVX512-BF16), one packed (q/k/v and gate/up fused, every weight
prepacked for oneDNN), one plain. Both run the same work, alternating call block
by call block so machine load hits them alike:

  * ``linears``: only the step's linear layers (30 layers' q/k/v, o, gate/up,
    down, and lm_head on the rows that become logits) for 1, 8, 32 rows (decode
    batches) and 2,048 rows (a prefill chunk);
  * ``decode``: whole decode steps through the paged model, batch 1, 8, 32 at
    context 256 and 1,024 (bench/decode_speed.py's random K/V state);
  * ``prefill``: one 2,048-token prefill forward.

    python bench/packed_linears.py            # results/packed_linears.{json,png}
    python bench/packed_linears.py --dtype float32 --parts linears --name packed_linears_fp32

``--dtype float32`` packs anyway (bypassing ``can_pack``) to show why the engine
does not pack float32.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import RESULTS, environment, write_json
from bench.decode_speed import BLOCK, DecodeState
from prefix.model.forward_batch import ForwardBatch
from prefix.model.kv_cache import PagedKVCache
from prefix.model.llama import DecoderLayer, LlamaModel
from prefix.model.loader import LoadedModel, default_model_path, load_model
from prefix.model.packed_linear import PackedLinear, can_pack


def linear_calls(model: LlamaModel, rows: int) -> Callable[[], None]:
    """A closure running every linear product of one step of ``rows`` rows."""
    cfg = model.config
    dtype = model.dtype
    gen = torch.Generator().manual_seed(rows)
    x_hidden = torch.randn(rows, cfg.hidden_size, generator=gen).to(dtype)
    x_inter = torch.randn(rows, cfg.intermediate_size, generator=gen).to(dtype)
    x_head = x_hidden[: min(rows, 32)]  # only the rows that become logits
    calls: list[tuple[nn.Module, torch.Tensor]] = []
    for layer in model.layers:
        assert isinstance(layer, DecoderLayer)
        attn, mlp = layer.self_attn, layer.mlp
        if attn.qkv_proj is not None and mlp.gate_up_proj is not None:
            calls += [(attn.qkv_proj, x_hidden), (mlp.gate_up_proj, x_hidden)]
        else:
            assert attn.q_proj and attn.k_proj and attn.v_proj and mlp.gate_proj and mlp.up_proj
            calls += [(m, x_hidden) for m in (attn.q_proj, attn.k_proj, attn.v_proj)]
            calls += [(mlp.gate_proj, x_hidden), (mlp.up_proj, x_hidden)]
        calls += [(attn.o_proj, x_hidden), (mlp.down_proj, x_inter)]
    head = model.lm_head_packed if model.lm_head_packed is not None else model.lm_head
    calls.append((head, x_head))

    def run() -> None:
        with torch.inference_mode():
            for module, x in calls:
                module(x)

    return run


def alternate(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[float]]:
    """Each fn ``repeats`` times, interleaved; the first round warms up and is dropped."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for i in range(repeats + 1):
        for name, fn in fns.items():
            started = time.perf_counter()
            fn()
            if i:
                times[name].append(time.perf_counter() - started)
    return times


def row(kind: str, point: str, times: dict[str, list[float]], work: int) -> dict[str, Any]:
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {
        "kind": kind,
        "point": point,
        "plain_ms": round(med["plain"] * 1000, 2),
        "packed_ms": round(med["packed"] * 1000, 2),
        "speedup": round(med["plain"] / med["packed"], 2),
        "samples_ms": {k: [round(s * 1000, 2) for s in v] for k, v in times.items()},
    }
    if kind == "decode":
        out["plain_tokens_per_s"] = round(work / med["plain"], 1)
        out["packed_tokens_per_s"] = round(work / med["packed"], 1)
    print(
        f"  {kind:>7} {point:>18}: plain {out['plain_ms']:8.2f} ms, packed "
        f"{out['packed_ms']:8.2f} ms -> {out['speedup']:.2f}x",
        flush=True,
    )
    return out


def plot(rows: list[dict[str, Any]], path: Path, dtype: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.8))
    labels = [f"{r['kind']}\n{r['point']}" for r in rows]
    colors = {"linears": "tab:blue", "decode": "tab:green", "prefill": "tab:orange"}
    ax.bar(range(len(rows)), [r["speedup"] for r in rows], color=[colors[r["kind"]] for r in rows])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)), labels, fontsize=6)
    ax.set_ylabel("plain time / packed time")
    ax.set_title(f"SmolLM2-135M {dtype}: packed + fused linears vs F.linear (higher is faster)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def decode_steps(state: DecodeState, model: LlamaModel) -> Callable[[], None]:
    """A closure decoding the next position of ``state`` on each call."""
    position = [0]

    def run() -> None:
        state.step(model, position[0])
        position[0] += 1

    return run


def force_pack(model: LlamaModel) -> None:
    """``model.pack()`` without its dtype check (to measure what it would give)."""
    for layer in model.layers:
        assert isinstance(layer, DecoderLayer)
        layer.self_attn.pack()
        layer.mlp.pack()
    model.lm_head_packed = PackedLinear([model.lm_head])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=8, help="timed rounds per point")
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    ap.add_argument("--parts", default="linears,decode,prefill", help="comma-separated")
    ap.add_argument("--name", default="packed_linears")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    dtype = torch.bfloat16 if args.dtype == "bfloat16" else torch.float32
    if not torch.backends.mkldnn.is_available():
        raise SystemExit("this torch build has no oneDNN; nothing to compare")
    if dtype == torch.bfloat16 and not can_pack(dtype, "cpu"):
        raise SystemExit(
            "oneDNN cannot pack bf16 weights on this CPU (it needs AVX512 or AVX-NE-CONVERT);"
            " try --dtype float32"
        )
    print(f"loading SmolLM2 twice in {args.dtype} ...", flush=True)
    models: dict[str, LoadedModel] = {
        name: load_model(default_model_path(), device="cpu", dtype=dtype, verbose=False)
        for name in ("plain", "packed")
    }
    force_pack(models["packed"].model)
    load_start = os.getloadavg()[0]
    results: list[dict[str, Any]] = []
    if "linears" in parts:
        print("linear layers of one step:", flush=True)
    for rows in (1, 8, 32, 2048) if "linears" in parts else ():
        fns = {k: linear_calls(m.model, rows) for k, m in models.items()}
        results.append(row("linears", f"{rows} rows", alternate(fns, args.repeats), rows))
    if "decode" in parts:
        print("whole decode steps:", flush=True)
    for batch in (1, 8, 32) if "decode" in parts else ():
        for context in (256, 1024):
            states = {
                k: DecodeState(m, batch, context, args.repeats + 1) for k, m in models.items()
            }
            fns = {k: decode_steps(states[k], m.model) for k, m in models.items()}
            point = f"batch {batch} ctx {context}"
            results.append(row("decode", point, alternate(fns, args.repeats), batch))
    tokens = torch.randint(100, 40_000, (2048,), generator=torch.Generator().manual_seed(0))

    def prefill(name: str) -> Callable[[], None]:
        loaded = models[name]
        cache = PagedKVCache.for_model(loaded.config, BLOCK, num_blocks=129, dtype=dtype)
        table = list(range(128))

        def run() -> None:
            loaded.model(ForwardBatch.for_prefill(tokens.tolist(), 0, table, BLOCK), cache)

        return run

    if "prefill" in parts:
        print("prefill:", flush=True)
        fns = {k: prefill(k) for k in models}
        repeats = max(3, args.repeats // 2)
        results.append(row("prefill", "2048 tokens", alternate(fns, repeats), 2048))
    payload = {
        "bench": "packed_linears",
        "model": models["plain"].model_id,
        "dtype": args.dtype,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "environment": environment(),
        "rows": results,
    }
    write_json(args.name, payload)
    plot(results, RESULTS / f"{args.name}.png", args.dtype)


if __name__ == "__main__":
    main()
