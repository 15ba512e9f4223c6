"""The pair verifier's forward alone, for ``bench/verifier_latency.py --forward``.

Pairs are BANKING77 questions against the nearest-by-intent and random others
(short customer-support questions, ~30 tokens a pair, as on the hit path). See
the docstring of bench/verifier_latency.py for what each section measures.
"""

from __future__ import annotations

import copy
import random
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from functools import partial
from typing import Any

import torch

from bench.semantic_data import DATA_DIR, load_banking77
from validators import onnx_forward
from validators.verifier import PairVerifier
from validators.verifier_dtype import apply_dtype
from validators.verifier_en import FORWARD_CHUNK, INT8_FORWARD_CHUNK, PROBE_PAIRS
from validators.verify_batcher import Row

BATCHES = (1, 5, 32)
CANDIDATES = 5  # the top-k of a lookup


def pairs_from_banking77(n: int, seed: int) -> list[tuple[str, str]]:
    questions = load_banking77(DATA_DIR)
    rng = random.Random(seed)
    by_intent: dict[str, list[str]] = {}
    for q in questions:
        by_intent.setdefault(q.intent, []).append(q.text)
    out = []
    for _ in range(n):
        a = rng.choice(questions)
        same = rng.random() < 0.5
        b = rng.choice(by_intent[a.intent]) if same else rng.choice(questions).text
        out.append((a.text, b))
    return out


def rows_of(verifier: PairVerifier, pairs: list[tuple[str, str]]) -> list[Row]:
    return verifier.en.encode(pairs)


def timed(fns: dict[str, Callable[[], list[float]]], repeats: int) -> dict[str, Any]:
    """Median ms of each ``fn()`` over ``repeats`` rounds (after two warm-ups), and its
    result; the variants take turns within a round, so a load change hits them alike."""
    results = {name: fn() for name, fn in fns.items() for _ in range(2)}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            results[name] = fn()
            samples[name].append((time.perf_counter() - t0) * 1000)
    return {name: (statistics.median(samples[name]), results[name]) for name in fns}


def variants(verifier: PairVerifier) -> dict[str, Callable[[list[Row]], list[float]]]:
    fp32 = verifier.en.model
    bf16: Any = copy.deepcopy(fp32)
    bf16.to(torch.bfloat16)  # every weight, LayerNorm included
    bf16_linears = copy.deepcopy(fp32)
    apply_dtype(bf16_linears.bert.encoder, "bfloat16")  # CACHEGATE_VERIFIER_DTYPE=bfloat16
    int8 = torch.ao.quantization.quantize_dynamic(
        copy.deepcopy(fp32), {torch.nn.Linear}, dtype=torch.qint8
    )

    def chunked(model: Any, autocast: bool = False) -> Callable[[list[Row]], list[float]]:
        def run(rows: list[Row]) -> list[float]:
            verifier.en.model = model
            ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else nullcontext()
            try:
                with ctx:
                    return verifier.en.forward_rows(rows)
            finally:
                verifier.en.model = fp32

        return run

    def one_padded_batch(rows: list[Row]) -> list[float]:  # the forward before this change
        return verifier.en.forward(rows)

    def graph(int8: bool) -> onnx_forward.OnnxForward:
        """The float32 model exported to ONNX Runtime, its products in int8 or not
        (as validators/onnx_forward.py builds and checks it)."""

        def logits(ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return fp32(input_ids=ids, token_type_ids=types, attention_mask=mask).logits[:, 0]

        en = verifier.en
        probes = [en.tensors(en.encode(p)) for p in onnx_forward.batches(PROBE_PAIRS)]
        names = ("input_ids", "token_type_ids", "attention_mask")
        bound = onnx_forward.Bound(fp32, logits)
        return onnx_forward.build(bound, names, verifier.threads, probes, int8=int8)

    def through(
        onnx: onnx_forward.OnnxForward, chunk: int = FORWARD_CHUNK
    ) -> Callable[[list[Row]], list[float]]:
        def run(rows: list[Row]) -> list[float]:
            before = verifier.en.forward_chunk
            verifier.en.graph, verifier.en.forward_chunk = onnx, chunk
            try:
                return verifier.en.forward_rows(rows)
            finally:
                verifier.en.graph, verifier.en.forward_chunk = None, before

        return run

    int8_graph = graph(int8=True)
    return {
        "fp32_one_padded_batch": one_padded_batch,
        f"fp32_sorted_chunks_of_{FORWARD_CHUNK}": chunked(fp32),
        "bf16_autocast_chunks": chunked(fp32, autocast=True),
        "bf16_weights_chunks": chunked(bf16),
        "bf16_linears_chunks": chunked(bf16_linears),
        "int8_dynamic_chunks": chunked(int8),
        # ONNX Runtime: float32 (the default where bf16 is not native) and int8 products
        # (7-bit weights, per channel: validators/onnx_quantize.py), not calibrated.
        "fp32_onnx_chunks": through(graph(int8=False)),
        "int8_onnx_chunks": through(int8_graph),
        # As the verifier serves int8 since session 31: one pair a forward, so a pair's
        # score does not move with the activations' shared scale (validators/verifier_en.py).
        f"int8_onnx_rows_of_{INT8_FORWARD_CHUNK}": through(int8_graph, INT8_FORWARD_CHUNK),
    }


def forward_section(verifier: PairVerifier, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    runs = variants(verifier)
    for n in BATCHES:
        rows = rows_of(verifier, pairs[:n])
        section: dict[str, Any] = {"mean_tokens": statistics.fmean(len(r[0]) for r in rows)}
        timings = timed({name: partial(run, rows) for name, run in runs.items()}, max(5, 60 // n))
        for name, (ms, _) in timings.items():
            section[name] = {"ms_per_forward": round(ms, 2), "ms_per_pair": round(ms / n, 2)}
            print(f"batch {n:2} {name:28} {ms / n:6.2f} ms/pair")
        out[f"batch_{n}"] = section
    return out


def drift_section(verifier: PairVerifier, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """How far each variant's scores are from float32's, and decisions flipped at the
    cut of the default target (1%), over ``pairs``."""
    cut = verifier.cut_for(0.01)
    rows = rows_of(verifier, pairs)
    scores = {
        name: torch.sigmoid(torch.tensor(run(rows), dtype=torch.float64))
        for name, run in variants(verifier).items()
        if name != "fp32_one_padded_batch"
    }
    reference = scores.pop(f"fp32_sorted_chunks_of_{FORWARD_CHUNK}")
    out: dict[str, Any] = {
        "pairs": len(pairs),
        "cut": cut,
        "served_fp32": int((reference > cut).sum()),
    }
    for name, probs in scores.items():
        diff = (probs - reference).abs()
        out[name] = {
            "max_abs_diff": round(float(diff.max()), 5),
            "mean_abs_diff": round(float(diff.mean()), 5),
            "decisions_flipped_at_cut": int(((probs > cut) != (reference > cut)).sum()),
        }
        print(f"drift {name:28} {out[name]}")
    return out


def timed_lookup(verifier: PairVerifier, lookup: tuple[str, list[str]]) -> float:
    t0 = time.perf_counter()
    verifier.score(*lookup)
    return (time.perf_counter() - t0) * 1000


def concurrent_section(
    verifier: PairVerifier, pairs: list[tuple[str, str]], clients: int, rounds: int = 6
) -> dict[str, Any]:
    lookups = [
        (pairs[i][0], [b for _, b in pairs[i : i + CANDIDATES]])
        for i in range(0, clients * CANDIDATES * rounds, CANDIDATES)
    ]
    out: dict[str, Any] = {"clients": clients, "candidates_per_lookup": CANDIDATES}
    for name, max_rows in (("serial_lock", 1), ("batched", 32)):
        verifier.batcher.max_rows = max_rows  # 1: one request per forward, as before
        forwards = verifier.batcher.forwards
        t0 = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            latencies = sorted(pool.map(partial(timed_lookup, verifier), lookups))
        wall = time.perf_counter() - t0
        out[name] = {
            "lookups_per_s": round(len(lookups) / wall, 1),
            "pairs_per_s": round(len(lookups) * CANDIDATES / wall, 1),
            "latency_p50_ms": round(latencies[len(latencies) // 2], 1),
            "latency_p99_ms": round(latencies[int(len(latencies) * 0.99)], 1),
            "forwards": verifier.batcher.forwards - forwards,
            "lookups": len(lookups),
        }
        print(f"{clients} clients {name:12} {out[name]}")
    verifier.batcher.max_rows = 32
    return out


def run(threads: int, clients: int, seed: int) -> dict[str, Any]:
    torch.set_num_threads(threads)  # every variant on the verifier's threads
    # torch, so that the variants' model swaps run (ONNX Runtime is a variant of its own)
    verifier = PairVerifier(threads=threads, zh=False, cache_size=0, backend="torch")
    pairs = pairs_from_banking77(max(64, clients * CANDIDATES * 7), seed)
    return {
        "verifier_threads": threads,
        "forward": forward_section(verifier, pairs),
        "score_drift_vs_fp32": drift_section(verifier, pairs_from_banking77(600, seed + 1)),
        "concurrent": concurrent_section(verifier, pairs, clients),
    }
