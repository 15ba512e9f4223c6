"""The English verifier alone on minimal pairs: one word swapped (bench/verifier_pairs_minimal.py).

Two sets, each model at the cut of its own calibration for the default target
misfire rate (1%):

* ``held_out``: ``bench/data/en_minimal_pairs_eval.jsonl``, written by hand for
  this check (FAQ questions on health, travel, law, banking, software, shopping
  and education; sibling and synonym sets that are not in the training lexicon):
  ``sibling`` pairs (label 0) and ``synonym`` pairs (label 1);
* ``lexicon_eval_split``: the training lexicon applied to the *evaluation* split's
  intent questions (never trained on), so the words are known and the questions new.

Per set: AUC (siblings against synonyms), the share of sibling negatives served
(score above the cut) and of synonym positives kept. ``--semantic NAME=PATH`` adds
the pipeline's key shares from a bench/semantic_eval_verifier.py result file.

    .venv/bin/python bench/verifier_minimal_eval.py --model shipped=validators/verifier_model \\
        --model trial=/tmp/s42/trial --semantic trial=bench/results/...json --out RESULTS
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.semantic_pairs import load_banking77, load_clinc150
from bench.verifier_pairs import split_of
from bench.verifier_pairs_minimal import minimal_pairs
from validators.verifier import DEFAULT_TARGET_MISFIRE, PairVerifier

ROOT = Path(__file__).resolve().parents[1]
HELD_OUT = ROOT / "bench" / "data" / "en_minimal_pairs_eval.jsonl"
# The pipeline's shares reported beside: (embedder, kind).
KEY_KINDS = (
    ("minilm", "en/paraphrase+"),
    ("minilm", "en/hard"),
    ("minilm", "en/paws-"),
    ("minilm", "en/direction"),
    ("minilm", "en/positives+"),
    ("e5", "zh/positives+"),
    ("e5", "zhw/positives+"),
    ("e5", "en/paraphrase+"),
    ("e5", "en/hard"),
)
Row = tuple[str, str, int, str]  # a, b, label, kind


def held_out(path: Path = HELD_OUT) -> list[Row]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [(r["a"], r["b"], int(r["label"]), r["kind"]) for r in rows]


def lexicon_eval_split(per_kind: int, seed: int) -> list[Row]:
    """The training lexicon's swaps of evaluation-split intent questions."""
    pool = [
        q
        for q in load_banking77() + load_clinc150()
        if split_of(f"{q.source}:{q.intent}") == "eval"
    ]
    pairs = minimal_pairs(pool, seed)
    rng = random.Random(seed)
    out: list[Row] = []
    for kind, name in (("minimal_sibling", "sibling"), ("minimal_synonym", "synonym")):
        group = [p for p in pairs if p.kind == kind]
        for p in rng.sample(group, min(per_kind, len(group))):
            out.append((p.a, p.b, p.label, name))
    return out


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a positive outscores a negative), ties counted half."""
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return float(greater + 0.5 * ties)


def measure(verifier: PairVerifier, rows: Sequence[Row], cut: float) -> dict[str, Any]:
    verdicts = verifier.verdicts_for_pairs([(a, b) for a, b, _, _ in rows])
    scores = np.asarray([v.score if v.supported else 0.0 for v in verdicts])
    labels = np.asarray([label for _, _, label, _ in rows])
    kinds = np.asarray([kind for *_, kind in rows])
    sib, syn = scores[kinds == "sibling"], scores[kinds == "synonym"]
    served: list[dict[str, Any]] = [
        {"a": a, "b": b, "score": round(float(s), 4)}
        for (a, b, label, _), s in zip(rows, scores, strict=True)
        if label == 0 and s > cut
    ]
    return {
        "pairs": len(rows),
        "siblings": len(sib),
        "synonyms": len(syn),
        "auc": round(auc(scores[labels == 1], scores[labels == 0]), 4),
        "siblings_served": round(float((sib > cut).mean()), 4),
        "synonyms_kept": round(float((syn > cut).mean()), 4),
        "sibling_median_score": round(float(np.median(sib)), 4),
        "synonym_median_score": round(float(np.median(syn)), 4),
        "served_siblings": sorted(served, key=lambda r: -r["score"])[:30],
    }


def pipeline(path: Path) -> dict[str, Any]:
    """The key served shares of a semantic_eval_verifier result, per embedder at the
    gateway's retrieval threshold (its own ``verifier`` block when T is the gateway's)."""
    result = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, Any] = {"file": str(path), "verifier_cut": result.get("verifier_cut")}
    for name, kind in KEY_KINDS:
        e = result["embedders"].get(name)
        if e is None:
            continue
        at = e.get("at_gateway_threshold", e)  # T chosen here = the gateway's: one block
        block = out.setdefault(name, {})
        block["gateway_threshold"] = at["retrieval_threshold"]
        block["chosen_threshold"] = e["retrieval_threshold"]
        block[kind] = at["verifier"].get(kind)
    return out


def named(items: Sequence[str] | None) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for item in items or ():
        name, sep, path = item.partition("=")
        if not sep:
            raise SystemExit(f"want NAME=PATH, got {item!r}")
        out[name] = Path(path)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", required=True, metavar="NAME=DIR")
    ap.add_argument("--semantic", action="append", metavar="NAME=RESULT_JSON")
    ap.add_argument("--held-out", type=Path, default=HELD_OUT)
    ap.add_argument("--lexicon-per-kind", type=int, default=400)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    sets = {
        "held_out": held_out(args.held_out),
        "lexicon_eval_split": lexicon_eval_split(args.lexicon_per_kind, args.seed),
    }
    result: dict[str, Any] = {
        "target_misfire_rate": DEFAULT_TARGET_MISFIRE,
        "sets": {k: len(v) for k, v in sets.items()},
        "models": {},
    }
    semantic = named(args.semantic)
    for name, model_dir in named(args.model).items():
        verifier = PairVerifier(model_dir, threads=args.threads)
        cut = verifier.cut_for(DEFAULT_TARGET_MISFIRE)
        block: dict[str, Any] = {"model_dir": str(model_dir), "cut": round(cut, 6)}
        block["weights_sha256"] = verifier.meta["weights_sha256"]
        for set_name, rows in sets.items():
            block[set_name] = measure(verifier, rows, cut)
            m = block[set_name]
            print(
                f"{name:8s} {set_name:18s} cut {cut:.4f} AUC {m['auc']:.3f} siblings served "
                f"{m['siblings_served']:.1%} synonyms kept {m['synonyms_kept']:.1%}"
            )
        if name in semantic:
            block["pipeline"] = pipeline(semantic[name])
            print(f"{name:8s} pipeline {json.dumps(block['pipeline'])}")
        result["models"][name] = block
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
