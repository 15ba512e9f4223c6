"""The int8 verifier graphs with and without ONNX Runtime's SkipLayerNormalization
fusion, in one run (validators/onnx_forward.py ``INT8_DISABLED_OPTIMIZERS``).

The verifier is loaded in int8 (English and Chinese) with the quantizer's output kept
aside, and real lookups are scored through it, keeping the arrays each forward was
given (BANKING77 test questions for English, the translated intent questions for
Chinese; a query and five candidates, as ``bench/verifier_backends.py``). Each int8
graph is then opened twice, with ONNX Runtime's default rewrites ("fused") and as the
verifier opens it ("served"), plus its float32 graph, and the three run interleaved
lookup by lookup on those arrays (a lookup's forwards together: the Chinese graph takes
a lookup's pairs in one forward, the English int8 graph one pair at a time), one
thread. Reported per language: p50 per lookup and per pair, the ratio, the logit
differences between the two int8 sessions and from each to float32 (int8's own noise,
which the fusion should neither add to nor take from), and how far the pair
probabilities moved (before the Chinese map onto the common scale).

    .venv/bin/python bench/verifier_int8_fusion.py [--calls 60] [--rounds 3]

Writes bench/results/verifier_int8_fusion.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from bench._common import environment, write_json
from bench.semantic_latency_timing import summary
from bench.verifier_backends import CANDIDATES, lookup_texts, lookups
from validators import onnx_forward
from validators.verifier import PairVerifier


def session(graph: bytes, disabled: list[str] | None) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(
        graph, options, providers=["CPUExecutionProvider"], disabled_optimizers=disabled
    )


@contextmanager
def captured_verifier() -> Iterator[tuple[PairVerifier, list[tuple[bytes, bytes]], list[Any]]]:
    """An int8 verifier, the (float32, int8) graph pairs it built, and a list that
    collects every forward's input arrays while it scores; the hooks are removed on
    exit."""
    graphs: list[tuple[bytes, bytes]] = []
    quantize = onnx_forward.quantize_int8

    def keep(model: bytes) -> bytes:
        out = quantize(model)
        graphs.append((model, out))
        return out

    inputs: list[Any] = []
    call = onnx_forward.OnnxForward.__call__

    def record(self: onnx_forward.OnnxForward, *arrays: np.ndarray) -> np.ndarray:
        inputs.append((self.input_names, arrays))
        return call(self, *arrays)

    onnx_forward.quantize_int8 = keep
    onnx_forward.OnnxForward.__call__ = record  # type: ignore[method-assign]
    try:
        verifier = PairVerifier(cache_size=0, dtype="int8", zh_precision="int8")
        verifier.score("你们几点开门", ["你们营业时间是几点"])  # builds the Chinese graph
        inputs.clear()
        yield verifier, graphs, inputs
    finally:
        onnx_forward.quantize_int8 = quantize
        onnx_forward.OnnxForward.__call__ = call  # type: ignore[method-assign]


def compare(
    graphs: tuple[bytes, bytes], calls: list[list[dict[str, Any]]], rounds: int
) -> dict[str, Any]:
    """Each lookup's forwards (``calls``: the feeds of one ``score`` call, one forward
    each; English int8 runs a forward per pair) timed together, three sessions
    interleaved call by call."""
    float32, int8 = graphs
    sessions = {
        "fused": session(int8, None),
        "served": session(int8, list(onnx_forward.INT8_DISABLED_OPTIMIZERS)),
        "float32": session(float32, None),
    }
    times: dict[str, list[float]] = {name: [] for name in sessions}
    logits: dict[str, list[np.ndarray]] = {name: [] for name in sessions}
    names = list(sessions)
    for r in range(rounds):
        for i, feeds in enumerate(calls):
            for name in names if (r + i) % 2 == 0 else names[::-1]:
                t0 = time.perf_counter_ns()
                outs = [sessions[name].run(None, feed)[0] for feed in feeds]
                times[name].append((time.perf_counter_ns() - t0) / 1e6)
                if r == 0:
                    logits[name].extend(np.asarray(o, dtype=np.float64).ravel() for o in outs)
    flat = {name: np.concatenate(v) for name, v in logits.items()}

    def diff(a: str, b: str) -> dict[str, float]:
        d = np.abs(flat[a] - flat[b])
        return {"mean": round(float(d.mean()), 4), "max": round(float(d.max()), 4)}

    out: dict[str, Any] = {name: summary(ms) for name, ms in times.items()}
    for name in sessions:
        out[name]["ms_per_pair_p50"] = round(out[name]["p50_ms"] / CANDIDATES, 2)
    out["served_over_fused_p50"] = round(out["served"]["p50_ms"] / out["fused"]["p50_ms"], 3)
    out["logit_difference"] = {
        "served_vs_fused": diff("served", "fused"),
        "fused_vs_float32": diff("fused", "float32"),
        "served_vs_float32": diff("served", "float32"),
    }
    prob = {name: 1.0 / (1.0 + np.exp(-v)) for name, v in flat.items()}
    moved = np.abs(prob["served"] - prob["fused"])
    out["probability_difference"] = {
        "served_vs_fused": {
            "mean": round(float(moved.mean()), 5),
            "max": round(float(moved.max()), 4),
        }
    }
    out["pairs"] = int(flat["fused"].size)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=60, help="lookups per language")
    ap.add_argument("--rounds", type=int, default=3, help="timed passes over them")
    args = ap.parse_args()
    torch.set_num_threads(1)
    started = time.perf_counter()
    en_texts, zh_texts = lookup_texts()

    print("loading the int8 verifier …", file=sys.stderr, flush=True)
    results: dict[str, Any] = {}
    with captured_verifier() as (verifier, graphs, inputs):
        if len(graphs) != 2:
            raise SystemExit(f"expected the English and the Chinese int8 graph, not {len(graphs)}")
        for lang, texts, built in (("en", en_texts, graphs[0]), ("zh", zh_texts, graphs[1])):
            calls = []
            for query, candidates in lookups(texts, args.calls):
                inputs.clear()
                verifier.score(query, candidates)
                calls.append([dict(zip(names, arrays, strict=True)) for names, arrays in inputs])
            forwards = sum(len(c) for c in calls)
            print(
                f"{lang}: {len(calls)} lookups ({forwards} forwards) x {args.rounds} rounds …",
                file=sys.stderr,
            )
            results[lang] = compare(built, calls, args.rounds)
            results[lang]["forwards"] = forwards

    print("\n| language | fused p50 (ms a call) | served p50 | served / fused |", end="")
    print(" logit diff served vs fused (mean / max) | vs float32: fused / served (mean) |")
    print("|---|---|---|---|---|---|")
    for lang, r in results.items():
        d = r["logit_difference"]
        print(
            f"| {lang} | {r['fused']['p50_ms']:.2f} | {r['served']['p50_ms']:.2f} | "
            f"x{r['served_over_fused_p50']} | {d['served_vs_fused']['mean']} / "
            f"{d['served_vs_fused']['max']} | {d['fused_vs_float32']['mean']} / "
            f"{d['served_vs_float32']['mean']} |"
        )
    write_json(
        "verifier_int8_fusion",
        {
            "benchmark": "verifier_int8_fusion",
            "disabled_optimizers": list(onnx_forward.INT8_DISABLED_OPTIMIZERS),
            "calls_per_language": args.calls,
            "rounds": args.rounds,
            "candidates_per_call": CANDIDATES,
            "results": results,
            "seconds": round(time.perf_counter() - started, 1),
            "environment": environment(),
        },
    )


if __name__ == "__main__":
    main()
