"""Would two cross-encoders judge English pairs better than one? A measured lever.

The Chinese cross-encoder (multilingual-e5-small, twelve layers; bench/train_verifier_zh.py)
also trained on a sample of the English training split, so it scores English pairs
too. This scores the English calibration and eval pairs (kind ``unrelated`` left
out, as in the calibration) with both models and combines their logits,
``(1 - w) * english + w * e5``, for a few weights ``w``; each combination's cut is the
1% target read off its own calibration negatives (English only), as
bench/verifier_calibrate.py reads the shipped one. Reported on the eval split: AUC,
negatives served and positives kept at that cut, per kind, and what each model's
forward cost a pair here (one thread, batches of 64 sorted by length).

    .venv/bin/python bench/verifier_ensemble.py [--per-kind 400] [--cal-per-kind 500]

Writes bench/results/<name>.json (default verifier_ensemble) and prints a table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import environment, write_json
from bench.verifier_eval import PAIRS, sample_eval
from bench.verifier_pairs import VPair
from validators.verifier import MODEL_DIR, PairVerifier

WEIGHTS = (0.0, 0.2, 0.3, 0.4, 0.5, 1.0)
TARGET = 0.01


def logit(p: Sequence[float]) -> np.ndarray:
    q = np.clip(np.asarray(p, dtype=np.float64), 1e-7, 1 - 1e-7)
    return np.log(q / (1 - q))


def english_pairs(pairs: Sequence[VPair], per_kind: int, split: str) -> list[VPair]:
    return [
        p
        for p in sample_eval(pairs, per_kind, split=split)
        if p.lang == "en" and p.kind != "unrelated"
    ]


def score_both(
    verifier: PairVerifier, pairs: Sequence[VPair], label: str
) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """Both models' logits per pair, and each forward's milliseconds a pair."""
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i].a) + len(pairs[i].b))
    en = np.zeros(len(pairs))
    e5 = np.zeros(len(pairs))
    spent = {"english_ms_per_pair": 0.0, "e5_ms_per_pair": 0.0}
    for lo in range(0, len(order), 64):
        idx = order[lo : lo + 64]
        ab = [(pairs[i].a, pairs[i].b) for i in idx]
        t0 = time.perf_counter()
        verdicts = verifier.verdicts_for_pairs(ab)
        t1 = time.perf_counter()
        raw = verifier.zh_raw_scores(ab)
        t2 = time.perf_counter()
        spent["english_ms_per_pair"] += (t1 - t0) * 1000
        spent["e5_ms_per_pair"] += (t2 - t1) * 1000
        # A pair either model cannot read scores 0 in it (refused, as served).
        en[idx] = logit([v.score if v.supported else 0.0 for v in verdicts])
        e5[idx] = logit([0.0 if r is None else r for r in raw])
        print(f"{label}: scored {min(lo + 64, len(order))}/{len(order)}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    return en, e5, {k: round(v / max(len(pairs), 1), 2) for k, v in spent.items()}


def cut_at(negatives: np.ndarray, target: float) -> float:
    ordered = np.sort(negatives)[::-1]
    allowed = int(np.floor(target * len(ordered)))
    return float(ordered[allowed]) if allowed < len(ordered) else float("-inf")


def combination(
    w: float,
    cal: tuple[np.ndarray, np.ndarray, np.ndarray],
    ev: tuple[np.ndarray, np.ndarray, np.ndarray],
    kinds: np.ndarray,
) -> dict[str, Any]:
    (cal_en, cal_e5, cal_labels), (ev_en, ev_e5, labels) = cal, ev
    cal_score = (1 - w) * cal_en + w * cal_e5
    score = (1 - w) * ev_en + w * ev_e5
    cut = cut_at(cal_score[cal_labels == 0], TARGET)
    served = score > cut
    by_kind = {k: round(float(served[kinds == k].mean()), 4) for k in sorted(set(kinds))}
    return {
        "weight_e5": w,
        "cut_logit": round(cut, 4),
        "auc_cal": round(float(roc_auc_score(cal_labels, cal_score)), 4),
        "auc_eval": round(float(roc_auc_score(labels, score)), 4),
        "negatives_served": round(float(served[labels == 0].mean()), 4),
        "positives_kept": round(float(served[labels == 1].mean()), 4),
        "served_by_kind": by_kind,
    }


def kind_names(pairs: Sequence[VPair]) -> np.ndarray:
    return np.asarray([f"{p.kind}{'+' if p.label else ''}" for p in pairs])


def table(result: dict[str, Any]) -> str:
    rows = result["combinations"]
    kinds = list(rows[0]["served_by_kind"])
    lines = [
        f"English eval split, each combination at its own {TARGET:.0%} cut "
        "(calibration split); served share by kind",
        f"{'w(e5)':>6} {'AUCcal':>7} {'AUCeval':>7} {'neg':>6} {'pos':>6} "
        + " ".join(f"{k[:11]:>11}" for k in kinds),
    ]
    for r in rows:
        lines.append(
            f"{r['weight_e5']:>6.1f} {r['auc_cal']:>7.3f} {r['auc_eval']:>7.3f} "
            f"{r['negatives_served']:>6.3f} {r['positives_kept']:>6.3f} "
            + " ".join(f"{r['served_by_kind'][k]:>11.3f}" for k in kinds)
        )
    cost = result["ms_per_pair"]
    lines.append(
        f"forward per pair (batches of 64): English {cost['english_ms_per_pair']} ms, "
        f"e5 {cost['e5_ms_per_pair']} ms ({result['e5_precision']})"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=Path, default=PAIRS)
    ap.add_argument("--per-kind", type=int, default=400, help="eval pairs per kind")
    ap.add_argument("--cal-per-kind", type=int, default=500, help="calibration pairs per kind")
    ap.add_argument("--e5-precision", choices=("float32", "int8"), default="float32")
    ap.add_argument("--name", default="verifier_ensemble", help="bench/results/<name>.json")
    args = ap.parse_args(argv)
    from bench.train_verifier import load_or_build_pairs

    every = load_or_build_pairs(args.pairs, rebuild=False)
    verifier = PairVerifier(MODEL_DIR, threads=1, zh_precision=args.e5_precision)
    cal_pairs = english_pairs(every, args.cal_per_kind, "cal")
    ev_pairs = english_pairs(every, args.per_kind, "eval")
    cal_en, cal_e5, _ = score_both(verifier, cal_pairs, "calibration")
    ev_en, ev_e5, cost = score_both(verifier, ev_pairs, "eval")
    cal = (cal_en, cal_e5, np.asarray([p.label for p in cal_pairs]))
    ev = (ev_en, ev_e5, np.asarray([p.label for p in ev_pairs]))
    kinds = kind_names(ev_pairs)
    result = {
        "benchmark": "verifier_ensemble",
        "environment": environment(),
        "target_misfire_rate": TARGET,
        "e5_precision": args.e5_precision,
        "cal_pairs": len(cal_pairs),
        "eval_pairs": len(ev_pairs),
        "counts": {k: int((kinds == k).sum()) for k in sorted(set(kinds))},
        "ms_per_pair": cost,
        "combinations": [combination(w, cal, ev, kinds) for w in WEIGHTS],
    }
    write_json(args.name, result)
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
