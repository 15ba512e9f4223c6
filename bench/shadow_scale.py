"""Shadow verification's agreement floor on each embedder's scale (docs/misfire_reports.md).

Shadow verification calls a served answer and a fresh one ``agree`` when their
cosine reaches ``CACHEGATE_SHADOW_MIN_SIMILARITY`` (0.80, a MiniLM cosine). e5's
cosines are bunched near 1, so the same 0.80 read on e5's scale (Chinese answers under
``auto``, every answer under ``e5``) agrees with nearly anything. This measures it on
the only labelled texts at hand, the intent questions written in Chinese with their
English originals (``bench/data/zh_written_questions.jsonl``): pairs of one intent
(same meaning) and of two intents (different meaning), each embedder reading the
language it serves, and the share of each at or above the floor as given and put on
e5's scale by :func:`semantic.embedder_routed.on_routed_scale` (0.80 → 0.9375, the map
that puts MiniLM's retrieval threshold on e5's).

    .venv/bin/python bench/shadow_scale.py [--sample 400]

Writes bench/results/shadow_scale.json.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import environment, write_json
from semantic.embedder_routed import on_routed_scale
from semantic.embedders import build_embedder

QUESTIONS = Path(__file__).resolve().parent / "data" / "zh_written_questions.jsonl"
FLOOR = 0.80


def shares(vectors: np.ndarray, intents: Sequence[str], floors: Sequence[float]) -> dict[str, Any]:
    """Share of same-intent and of different-intent pairs at or above each floor."""
    upper = np.triu_indices(len(intents), 1)
    cos = (vectors @ vectors.T)[upper]  # (n·(n−1)/2,) pairwise cosines
    labels = np.asarray(intents)
    same = labels[upper[0]] == labels[upper[1]]
    out: dict[str, Any] = {"same_pairs": int(same.sum()), "different_pairs": int((~same).sum())}
    out["different_median"] = round(float(np.median(cos[~same])), 4)
    out["same_median"] = round(float(np.median(cos[same])), 4) if same.any() else None
    for floor in floors:
        key = f"{floor:.4f}"
        out[key] = {
            "same_at_or_above": round(float((cos[same] >= floor).mean()), 4)
            if same.any()
            else None,
            "different_at_or_above": round(float((cos[~same] >= floor).mean()), 4),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=400, help="questions drawn (seed 0)")
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    rows = random.Random(0).sample(rows, min(args.sample, len(rows)))
    intents = [f"{r['source']}:{r['intent']}" for r in rows]
    e5, minilm = build_embedder("e5", progress=False), build_embedder("minilm", progress=False)
    mapped = round(on_routed_scale(FLOOR), 4)
    result: dict[str, Any] = {
        "questions": len(rows),
        "floor": FLOOR,
        "floor_on_e5_scale": mapped,
        "minilm_en": shares(minilm.embed([r["en"] for r in rows]), intents, [FLOOR]),
        "e5_en": shares(e5.embed([r["en"] for r in rows]), intents, [FLOOR, mapped]),
        "e5_zh": shares(e5.embed([r["zh"] for r in rows]), intents, [FLOOR, mapped]),
        "environment": environment(),
    }
    for name in ("minilm_en", "e5_en", "e5_zh"):
        row = result[name]
        print(
            f"{name}: different-meaning median {row['different_median']}, "
            + "; ".join(
                f"≥{k}: same {v['same_at_or_above']}, different {v['different_at_or_above']}"
                for k, v in row.items()
                if isinstance(v, dict)
            )
        )
    write_json("shadow_scale", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
