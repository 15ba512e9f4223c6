"""How much a random calibration sample moves the verifier's 1% cut, against the thinned
sample bench/verifier_cal_sample.py takes instead (session 29).

    .venv/bin/python bench/verifier_cal_draws.py [--model-dir validators/verifier_model] \\
        [--draws 40] [--out bench/results/verifier_cal_draws.json]

Scores every English calibration negative and positive the calibration counts with the
float32 verifier, then for each cap (pairs a (kind, label) group keeps) reports the 1%
cut over ``--draws`` random draws (mean, standard deviation, range; what the
calibration did until session 29 at cap 500), the thinned sample's cut at that cap,
and the nearest same-intent paraphrases kept at it. English only: its negatives set
the shared cut.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.verifier_cal_sample import calibration_pool, thin
from bench.verifier_calibrate import _cut, score_pairs
from bench.verifier_eval import PAIRS
from bench.verifier_pairs import load, report_lang
from validators.verifier import MODEL_DIR, PairVerifier

CAPS = (500, 1000, 1500, 3000, 10**9)


def cuts(negatives: dict[str, list[float]], cap: int, draws: int, target: float) -> dict[str, Any]:
    """The cut at ``target`` over random draws of ``cap`` a kind, and the thinned one."""
    drawn = []
    for seed in range(draws):
        rng = random.Random(seed)
        sample: list[float] = []
        for kind in sorted(negatives):
            g = negatives[kind]
            sample += rng.sample(g, cap) if len(g) > cap else g
        drawn.append(_cut(np.asarray(sample), target))
    thinned = [
        s
        for kind in sorted(negatives)
        for s in np.asarray(negatives[kind])[thin(negatives[kind], cap)]
    ]
    d = np.asarray(drawn)
    return {
        "cap": cap if cap < 10**9 else "all",
        "negatives": len(thinned),
        "drawn_mean": round(float(d.mean()), 4),
        "drawn_sd": round(float(d.std()), 4),
        "drawn_min": round(float(d.min()), 4),
        "drawn_max": round(float(d.max()), 4),
        "thinned": round(_cut(np.asarray(thinned), target), 4),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", type=Path, default=MODEL_DIR)
    ap.add_argument("--pairs", type=Path, default=PAIRS)
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    pool = [p for p in calibration_pool(load(args.pairs)) if report_lang(p) == "en"]
    empty: dict[str, Any] = {"negatives": {}, "positives": {}}
    verdicts = score_pairs(PairVerifier(args.model_dir, calibration=empty), pool, desc="English")
    negatives: dict[str, list[float]] = defaultdict(list)
    paraphrases: list[float] = []
    for p, v in zip(pool, verdicts, strict=True):
        score = v.score if v.supported else 0.0
        if not p.label:
            negatives[p.kind].append(score)
        elif p.kind == "paraphrase":
            paraphrases.append(score)
    para = np.asarray(paraphrases)
    rows = []
    for cap in CAPS:
        row = cuts(negatives, cap, args.draws, 0.01)
        row["paraphrases_kept_at_thinned"] = round(float((para > row["thinned"]).mean()), 4)
        rows.append(row)
        print(row)
    result = {
        "about": __doc__.split("\n\n")[0],
        "model_weights_sha256": PairVerifier(args.model_dir, calibration=empty).meta[
            "weights_sha256"
        ],
        "negatives_per_kind": {k: len(v) for k, v in sorted(negatives.items())},
        "paraphrases": len(paraphrases),
        "draws": args.draws,
        "target_misfire_rate": 0.01,
        "rows": rows,
    }
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
