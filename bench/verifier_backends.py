"""The pair verifier's forward: torch vs ONNX Runtime, English and Chinese, in one run.

A lookup asks the verifier about up to five candidates at once, so each timed call
is ``PairVerifier.score(query, 5 distinct candidates)`` with the verdict cache off
(every pair a forward), one thread, real questions: BANKING77 test pairs for
English, the translated intent questions (``bench/data/zh_intent_questions.jsonl``)
for Chinese. The variants run interleaved call by call, so the machine's noise falls
on all alike:

  en float32 torch / en float32 onnx   the English path where ``auto`` is float32
  en int8 onnx                         the English path's int8 graph
                                       (``CACHEGATE_VERIFIER_DTYPE=int8``, own calibration)
  en bfloat16 torch                    the English path on CPUs with native bf16
                                       (skipped elsewhere: emulated bf16 is slow)
  zh torch / zh onnx                   the Chinese path in float32
  zh onnx int8                         the Chinese path's int8 graph (own calibration)

It also reports the largest score difference between the two backends over every
timed call (the calibration is the float32 torch one).

    .venv/bin/python bench/verifier_backends.py [--calls 60] [--name verifier_backends]

Writes bench/results/<name>.json.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from bench._common import environment, write_json
from bench.semantic_data import DATA_DIR
from bench.semantic_latency_timing import summary
from prefix.model.dtype import resolve_dtype
from validators.verifier import PairVerifier

ZH_QUESTIONS = Path(__file__).resolve().parent / "data" / "zh_intent_questions.jsonl"
CANDIDATES = 5


def lookups(texts: list[str], calls: int) -> list[tuple[str, list[str]]]:
    """``calls`` (query, five other questions) from consecutive texts."""
    step = CANDIDATES + 1
    return [
        (texts[i * step], texts[i * step + 1 : (i + 1) * step])
        for i in range(min(calls, len(texts) // step))
    ]


def lookup_texts() -> tuple[list[str], list[str]]:
    """The questions lookups are made of: every 7th BANKING77 test question (English)
    and every 3rd translated intent question (Chinese)."""
    with (DATA_DIR / "banking77" / "test.csv").open(newline="", encoding="utf-8") as f:
        en_texts = [row["text"] for row in csv.DictReader(f)][::7]
    zh_rows = [json.loads(line) for line in ZH_QUESTIONS.read_text("utf-8").splitlines()]
    return en_texts, [row["zh"] for row in zh_rows][::3]


def calls_to_run(asked: int, supplies: list[int]) -> int:
    """``asked`` calls per variant, or as many as every variant's questions make: each
    variant times the same number of calls (it crashed past the supply before)."""
    return min([asked, *supplies])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=60, help="timed score() calls per variant")
    ap.add_argument("--name", default="verifier_backends", help="results/<name>.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    started = time.perf_counter()
    en_texts, zh_texts = lookup_texts()

    print("loading the verifier four ways …", file=sys.stderr, flush=True)
    onnx = PairVerifier(cache_size=0)
    plain = PairVerifier(cache_size=0, backend="torch")
    variants: dict[str, tuple[PairVerifier, list[tuple[str, list[str]]]]] = {
        "en_float32_torch": (plain, lookups(en_texts, args.calls)),
        "en_float32_onnx": (onnx, lookups(en_texts, args.calls)),
        "zh_torch": (plain, lookups(zh_texts, args.calls)),
        "zh_onnx": (onnx, lookups(zh_texts, args.calls)),
    }
    # int8 products in both languages, each with its own calibration
    # (validators/onnx_quantize.py); one verifier holds both graphs.
    int8 = PairVerifier(cache_size=0, dtype="int8", zh_precision="int8")
    variants["zh_onnx_int8"] = (int8, lookups(zh_texts, args.calls))
    variants["en_int8_onnx"] = (int8, lookups(en_texts, args.calls))
    native_bf16 = resolve_dtype("auto", "cpu")[0] == torch.bfloat16
    if native_bf16:
        bf16 = PairVerifier(cache_size=0, zh=False, dtype="bfloat16")
        variants["en_bfloat16_torch"] = (bf16, lookups(en_texts, args.calls))
    for verifier, calls in variants.values():  # warm-up, and loads the Chinese encoder
        verifier.score(*calls[0])

    times: dict[str, list[float]] = {name: [] for name in variants}
    scores: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    gc.collect()
    runs = calls_to_run(args.calls, [len(calls) for _, calls in variants.values()])
    if runs < args.calls:
        print(f"{runs} calls per variant (the questions make no more)", file=sys.stderr)
    for i in range(runs):
        for name in names if i % 2 == 0 else names[::-1]:
            verifier, calls = variants[name]
            query, candidates = calls[i]
            t0 = time.perf_counter_ns()
            scores[name].extend(verifier.score(query, candidates))
            times[name].append((time.perf_counter_ns() - t0) / 1e6)

    out: dict[str, Any] = {name: summary(ms) for name, ms in times.items()}
    for name in out:
        out[name]["ms_per_pair_p50"] = round(out[name]["p50_ms"] / CANDIDATES, 2)
    for lang, base in (("en", "en_float32"), ("zh", "zh")):
        t, o = out[f"{base}_torch"]["p50_ms"], out[f"{base}_onnx"]["p50_ms"]
        out[f"{lang}_onnx_over_torch_p50"] = round(o / t, 3)
        diff = max(
            abs(a - b) for a, b in zip(scores[f"{base}_onnx"], scores[f"{base}_torch"], strict=True)
        )
        out[f"{lang}_max_score_difference"] = diff
    # Each on its own calibration (Chinese: through its own map onto the common scale),
    # so moves are expected.
    int8_pairs = (("zh", "zh_onnx_int8", "zh_onnx"), ("en", "en_int8_onnx", "en_float32_onnx"))
    for lang, int8_name, base in int8_pairs:
        ratio = out[int8_name]["p50_ms"] / out[base]["p50_ms"]
        out[f"{lang}_int8_over_onnx_p50"] = round(ratio, 3)
        out[f"{lang}_int8_max_score_difference"] = max(
            abs(a - b) for a, b in zip(scores[int8_name], scores[base], strict=True)
        )
    print(f"\n| variant | score(query, {CANDIDATES}) p50 / p99 (ms) | per pair p50 (ms) |")
    print("|---|---|---|")
    for name in names:
        r = out[name]
        print(f"| {name} | {r['p50_ms']:.2f} / {r['p99_ms']:.2f} | {r['ms_per_pair_p50']:.2f} |")
    for lang in ("en", "zh"):
        print(
            f"{lang}: onnx / torch p50 x{out[f'{lang}_onnx_over_torch_p50']}, largest score "
            f"difference {out[f'{lang}_max_score_difference']:.2e}"
        )
    for lang in ("en", "zh"):
        print(
            f"{lang}: int8 / float32 onnx p50 x{out[f'{lang}_int8_over_onnx_p50']}, largest "
            f"score difference {out[f'{lang}_int8_max_score_difference']:.3f} (each on its "
            "own calibration)"
        )
    write_json(
        args.name,
        {
            "benchmark": "verifier_backends",
            "environment": {**environment(), "load_average_at_end": list(os.getloadavg())},
            "calls_per_variant": runs,
            "candidates_per_call": CANDIDATES,
            "native_bfloat16": native_bf16,
            "results": out,
            "seconds": round(time.perf_counter() - started, 1),
        },
    )


if __name__ == "__main__":
    main()
