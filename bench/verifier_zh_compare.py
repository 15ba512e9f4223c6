"""Two verifiers on the Chinese pairs of the eval split, each at its own 1% cut.

    .venv/bin/python bench/verifier_zh_compare.py --old DIR --new validators/verifier_model \\
        [--per-kind 400] [--out bench/results/verifier_zh_compare_s29.json]

The verifier alone (no retrieval threshold, no entity validator): per report language
(``zh`` translated, ``zhw`` written in Chinese) the AUC, the positives kept, the
negatives served and the hard negatives served, at the cut each model's own
calibration gives for a 1% target. ``--old`` is a model directory (for the weights
shipped before, ``git show`` them into a copy of ``validators/verifier_model``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.verifier_calibrate import score_pairs
from bench.verifier_eval import PAIRS, sample_eval
from bench.verifier_pairs import VPair, load, report_lang
from validators.verifier import DEFAULT_TARGET_MISFIRE, PairVerifier


def compare(pairs: Sequence[VPair], model_dir: Path) -> dict[str, dict[str, float]]:
    verifier = PairVerifier(model_dir)
    cut = verifier.cut_for(DEFAULT_TARGET_MISFIRE)
    verdicts = score_pairs(verifier, pairs, desc=str(model_dir))
    scores = np.asarray([v.score if v.supported else 0.0 for v in verdicts])
    labels = np.asarray([p.label for p in pairs])
    hard = np.asarray([p.kind == "hard" for p in pairs])
    out: dict[str, dict[str, float]] = {}
    for lang in ("zh", "zhw"):
        mine = np.asarray([report_lang(p) == lang for p in pairs])
        if not mine.any():
            continue
        out[lang] = {
            "cut": round(cut, 6),
            "auc": round(float(roc_auc_score(labels[mine], scores[mine])), 4),
            "kept": round(float((scores[mine & (labels == 1)] > cut).mean()), 4),
            "misfire": round(float((scores[mine & (labels == 0)] > cut).mean()), 4),
            "hard": round(float((scores[mine & hard] > cut).mean()), 4),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--pairs", type=Path, default=PAIRS)
    ap.add_argument("--per-kind", type=int, default=400)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    every = load(args.pairs)
    chinese = [p for p in sample_eval(every, args.per_kind) if p.lang == "zh"]
    chinese = [p for p in chinese if p.kind != "unrelated"]
    result: dict[str, Any] = {"per_kind": args.per_kind, "pairs": len(chinese)}
    for name, model_dir in (("old", args.old), ("new", args.new)):
        for lang, row in compare(chinese, model_dir).items():
            result[f"{name}/{lang}"] = row
            print(f"{name} {lang}: {row}")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
