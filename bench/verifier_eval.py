"""Evaluate the shipped pair verifier on the eval split only (never trained on, never
used for calibration): per language and pair kind, AUC, misfire rate (negatives
scored above the default cut) and positives kept at the default cut (target
misfire 1%), the share of pairs refused as unsupported, and the latency of one
``score(query, 5 candidates)`` call.

    python bench/verifier_eval.py [--pairs data/verifier/pairs.jsonl] [--per-kind 1500]
    python bench/verifier_eval.py --lang zh --out bench/results/verifier_eval_zh.json

Writes ``bench/results/verifier_eval.json`` and prints a table. The pairs file is
the one bench/train_verifier.py wrote (it is rebuilt when missing).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.verifier_pairs import VPair, drop_crossing, report_lang
from validators.verifier import DEFAULT_TARGET_MISFIRE, MODEL_DIR, PairVerifier, Verdict

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "data" / "verifier" / "pairs.jsonl"
RESULTS = ROOT / "bench" / "results" / "verifier_eval.json"


def sample_eval(
    pairs: Sequence[VPair], per_kind: int, seed: int = 12, split: str = "eval"
) -> list[VPair]:
    """At most ``per_kind`` pairs of each (language, kind) of ``split``, fixed by ``seed``."""
    groups: dict[tuple[str, str], list[VPair]] = defaultdict(list)
    for p in drop_crossing(pairs):
        if p.split == split:
            # "zhw" sorts after "zh": the written questions' groups are drawn last, so
            # every other group's sample is what it was before they existed.
            groups[(report_lang(p), p.kind)].append(p)
    rng = random.Random(seed)
    out: list[VPair] = []
    for key in sorted(groups):
        g = groups[key]
        out += rng.sample(g, per_kind) if len(g) > per_kind else g
    return out


def _rates(labels: np.ndarray, scores: np.ndarray, cut: float) -> dict[str, Any]:
    pos, neg = scores[labels == 1], scores[labels == 0]
    row: dict[str, Any] = {
        "n": len(labels),
        "positives": len(pos),
        "negatives": len(neg),
    }
    row["auc"] = round(float(roc_auc_score(labels, scores)), 4) if len(pos) and len(neg) else None
    row["misfire"] = round(float((neg > cut).mean()), 4) if len(neg) else None
    row["kept"] = round(float((pos > cut).mean()), 4) if len(pos) else None
    return row


def latency(
    verifier: PairVerifier, pairs: Sequence[VPair], lang: str, calls: int
) -> dict[str, Any]:
    """Per-call time of ``score(query, 5 candidates)`` on real eval questions."""
    texts = sorted({t for p in pairs if p.lang == lang for t in (p.a, p.b)})
    rng = random.Random(5)
    if len(texts) < 6:
        return {}
    verifier.score(texts[0], texts[1:6])  # warm-up
    times = []
    for _ in range(calls):
        sample = rng.sample(texts, 6)
        t0 = time.perf_counter()
        verifier.score(sample[0], sample[1:])
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    p50 = statistics.median(times)
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    return {
        "calls": calls,
        "candidates": 5,
        "p50_ms": round(p50, 2),
        "p99_ms": round(p99, 2),
        "p50_ms_per_candidate": round(p50 / 5, 2),
        "threads": verifier.threads,
    }


def evaluate(
    verifier: PairVerifier,
    pairs: Sequence[VPair],
    per_kind: int,
    calls: int = 200,
    langs: Sequence[str] = ("en", "zh"),
) -> dict[str, Any]:
    # Sampled from every language and then filtered, so one language's pairs are the
    # same whether or not the other is evaluated beside it.
    chosen = [p for p in sample_eval(pairs, per_kind) if p.lang in langs]
    cut = verifier.cut_for(DEFAULT_TARGET_MISFIRE)
    # Batches of similar length: padding is most of the cost on a busy CPU.
    order = sorted(range(len(chosen)), key=lambda i: len(chosen[i].a) + len(chosen[i].b))
    by_position: dict[int, Verdict] = {}
    for lo in range(0, len(order), 64):
        batch = order[lo : lo + 64]
        found = verifier.verdicts_for_pairs([(chosen[i].a, chosen[i].b) for i in batch])
        by_position.update(zip(batch, found, strict=True))
        print(f"eval: scored {min(lo + 64, len(chosen))}/{len(chosen)}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    verdicts = [by_position[i] for i in range(len(chosen))]
    scores = np.asarray([v.score for v in verdicts])
    labels = np.asarray([p.label for p in chosen])
    unsupported = np.asarray([not v.supported for v in verdicts])
    by_kind: dict[str, dict[str, Any]] = {}
    for lang in sorted({report_lang(p) for p in chosen}):
        for kind in sorted({p.kind for p in chosen if report_lang(p) == lang}):
            idx = np.asarray(
                [i for i, p in enumerate(chosen) if report_lang(p) == lang and p.kind == kind]
            )
            row = _rates(labels[idx], scores[idx], cut)
            row["unsupported"] = round(float(unsupported[idx].mean()), 4)
            by_kind[f"{lang}/{kind}"] = row
    overall: dict[str, dict[str, Any]] = {}
    for lang in sorted({report_lang(p) for p in chosen}):
        idx = np.asarray(
            [i for i, p in enumerate(chosen) if report_lang(p) == lang and p.kind != "unrelated"]
        )
        overall[lang] = _rates(labels[idx], scores[idx], cut)
    return {
        "split": "eval",
        "zh_precision": verifier.zh_precision,
        "default_target_misfire_rate": DEFAULT_TARGET_MISFIRE,
        "default_cut": round(cut, 6),
        "per_kind_cap": per_kind,
        "overall_excluding_unrelated": overall,
        "by_kind": by_kind,
        "latency": {lang: latency(verifier, chosen, lang, calls) for lang in langs},
    }


def table(result: dict[str, Any]) -> str:
    def f(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = [
        f"default cut {result['default_cut']:.4f} (target misfire "
        f"{result['default_target_misfire_rate']:.0%}, eval split only)",
        f"{'lang/kind':28} {'n':>6} {'pos':>6} {'AUC':>6} {'misfire':>8} {'kept':>6} {'unsup':>6}",
    ]
    rows = {
        **result["by_kind"],
        **{f"{k}/ALL (no unrelated)": v for k, v in result["overall_excluding_unrelated"].items()},
    }
    for name, r in rows.items():
        lines.append(
            f"{name:28} {r['n']:>6} {r['positives']:>6} {f(r['auc']):>6} "
            f"{f(r['misfire']):>8} {f(r['kept']):>6} {f(r.get('unsupported')):>6}"
        )
    for lang, lat in result["latency"].items():
        if lat:
            lines.append(
                f"latency {lang}: score(query, 5 candidates) p50 {lat['p50_ms']:.1f} ms "
                f"p99 {lat['p99_ms']:.1f} ms = {lat['p50_ms_per_candidate']:.2f} ms/candidate "
                f"({lat['threads']} thread(s))"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=Path, default=PAIRS)
    ap.add_argument("--per-kind", type=int, default=1500)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--model-dir", type=Path, default=MODEL_DIR, help="the verifier to evaluate")
    ap.add_argument(
        "--lang", choices=("en", "zh"), action="append", help="only this language (repeatable)"
    )
    ap.add_argument(
        "--zh-precision",
        choices=("float32", "int8"),
        default="float32",
        help="the Chinese graph's products (int8: its own calibration)",
    )
    args = ap.parse_args(argv)
    from bench.train_verifier import load_or_build_pairs

    pairs = load_or_build_pairs(args.pairs, rebuild=False)
    verifier = PairVerifier(args.model_dir, threads=args.threads, zh_precision=args.zh_precision)
    langs = tuple(args.lang or ("en", "zh"))
    result = evaluate(verifier, pairs, args.per_kind, args.calls, langs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(result))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
