"""Would a blend of the verifier's logit and the embedder's cosine serve more positives
than the gateway's box (cosine >= T and verifier above its cut) at the same misfire
goals? A measured lever for issue 12's recall goals.

The gateway serves a candidate when its cosine passes the retrieval threshold T *and*
the verifier scores it above the cut of the tenant's target: a box in (cosine,
verifier) space. A pair just under T with a verifier score of 0.999 is refused, as is
one at cosine 0.99 a hair under the cut. This tries a line instead: served when
``logit(verifier) + w * cosine >= c`` (and the entity validator accepts, and the
embedder covers both questions, as in the box). For each weight ``w`` the line ``c``
is the lowest at which every misfire goal holds on the *calibration* split, by the
same rule the box's T is chosen with (bench/semantic_eval_verifier.py ``goals_met``);
the weight that serves most English paraphrases on the calibration split is then
reported on the *eval* split beside the box. Nothing here changes the gateway.

    .venv/bin/python bench/verifier_cosine_blend.py [--per-kind 400] [--embedders minilm e5]

Writes bench/results/verifier_cosine_blend.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.semantic_eval_verifier import (
    Scored,
    choose_threshold,
    cosines,
    embedders,
    goals_met,
    served_rates,
)
from bench.semantic_eval_verifier_report import GOALS
from bench.verifier_eval import PAIRS, sample_eval
from validators.verifier import DEFAULT_TARGET_MISFIRE, PairVerifier

RESULTS = Path(__file__).resolve().parent / "results" / "verifier_cosine_blend.json"
WEIGHTS = (0.0, 5.0, 10.0, 20.0, 30.0, 40.0, 60.0, 80.0, 120.0)
FLOOR = 0.5  # no candidate below this cosine is retrieved at all (the sweep's bottom)
SHOWN = ("en/hard", "en/entity", "en/context", "en/paws-", "en/paraphrase+",
         "en/paraphrase_random+", "en/positives+", "zh/hard", "zhw/hard",
         "zh/positives+", "zhw/positives+")  # fmt: skip


def logits(scores: np.ndarray) -> np.ndarray:
    p = np.clip(scores.astype(np.float64), 1e-7, 1 - 1e-7)
    return np.log(p / (1 - p))


def lowest_line(
    kinds: np.ndarray, gate: np.ndarray, blended: np.ndarray, same: np.ndarray
) -> float:
    """The lowest ``c`` at which the misfire goals hold for ``gate & (blended >= c |
    same)``: scanned over the blended values of the gated pairs, from the top down."""
    values = np.unique(blended[gate])[::-1]
    best = float(values[0]) + 1.0 if len(values) else 0.0
    lo, hi = 0, len(values) - 1
    # goals_met is monotone in c (a higher line serves a subset): bisect on the ranks
    while lo <= hi:
        mid = (lo + hi) // 2
        c = float(values[mid])
        if goals_met(kinds, gate & ((blended >= c) | same)):
            best, lo = c, mid + 1
        else:
            hi = mid - 1
    return best


def evaluate(per_kind: int, names: Sequence[str]) -> dict[str, Any]:
    from bench.train_verifier import load_or_build_pairs

    every = load_or_build_pairs(PAIRS, rebuild=False)
    verifier = PairVerifier(threads=2)
    cut = verifier.cut_for(DEFAULT_TARGET_MISFIRE)
    ev = Scored(sample_eval(every, per_kind), verifier, cut)
    cal = Scored(sample_eval(every, per_kind, split="cal"), verifier, cut)
    out: dict[str, Any] = {"per_kind": per_kind, "verifier_cut": cut, "embedders": {}}
    for name, embedder in embedders(names).items():
        rows: dict[str, Any] = {}
        split_cos = {}
        for split, s in (("cal", cal), ("eval", ev)):
            cos, covered = cosines(embedder, s.pairs)
            split_cos[split] = (cos, covered)
        cos_c, cov_c = split_cos["cal"]
        cos_e, cov_e = split_cos["eval"]
        # the box, T chosen on cal as the gateway's is
        t = choose_threshold(cal.kinds, cal.verified & cov_c, cos_c)
        rows["box"] = {
            "retrieval_threshold": t,
            "cal": served_rates(cal.kinds, cal.verified & cov_c & (cos_c >= t)),
            "eval": served_rates(ev.kinds, ev.verified & cov_e & (cos_e >= t)),
        }
        gate_c = cal.accepted & cov_c & (cos_c >= FLOOR)
        gate_e = ev.accepted & cov_e & (cos_e >= FLOOR)
        lines = []
        for w in WEIGHTS:
            blended_c = logits(cal.scores) + w * cos_c
            c = lowest_line(cal.kinds, gate_c, blended_c, cal.same)
            served_c = gate_c & ((blended_c >= c) | cal.same)
            blended_e = logits(ev.scores) + w * cos_e
            served_e = gate_e & ((blended_e >= c) | ev.same)
            lines.append(
                {
                    "weight": w,
                    "line": round(c, 4),
                    "goals_met_cal": goals_met(cal.kinds, served_c),
                    "cal": served_rates(cal.kinds, served_c),
                    "eval": served_rates(ev.kinds, served_e),
                }
            )
            print(f"{name} w={w:g}: cal paraphrase {lines[-1]['cal'].get('en/paraphrase+')}",
                  file=sys.stderr)  # fmt: skip
        chosen = max(lines, key=lambda r: (r["goals_met_cal"], r["cal"].get("en/paraphrase+", 0)))
        rows["lines"] = lines
        rows["chosen_weight"] = chosen["weight"]
        out["embedders"][name] = rows
    return out


def table(result: dict[str, Any]) -> str:
    lines = []
    for name, rows in result["embedders"].items():
        lines.append(f"\n{name}: eval split, served share (goals: hard/entity/context <= 1%, "
                     "paws- <= 5%, paraphrase+ >= 60%)")  # fmt: skip
        lines.append(f"{'decision':<22}" + "".join(f"{k:>22}" for k in SHOWN))
        box = rows["box"]
        head = f"box T {box['retrieval_threshold']:.2f}"
        lines.append(f"{head:<22}" + "".join(f"{box['eval'].get(k, 0):>22.4f}" for k in SHOWN))
        for r in rows["lines"]:
            mark = "*" if r["weight"] == rows["chosen_weight"] else " "
            head = f"{mark}line w={r['weight']:g}"
            lines.append(f"{head:<22}" + "".join(f"{r['eval'].get(k, 0):>22.4f}" for k in SHOWN))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-kind", type=int, default=400)
    ap.add_argument("--embedders", nargs="+", default=["minilm", "e5"])
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    result = evaluate(args.per_kind, args.embedders)
    result["goals"] = [list(g) for g in GOALS]
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
