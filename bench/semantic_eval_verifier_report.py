"""What bench/semantic_eval_verifier.py reports: issue 12's goals and whether a run met
them, the table it prints, and how a run's results file keeps the columns of
embedders it did not evaluate (only when the earlier file scored the very same pairs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Goals of issue 12 at the defaults: (kind label, bound, "max" misfire or "min" recall).
GOALS = (
    ("en/hard", 0.01, "max"),
    ("en/entity", 0.01, "max"),
    ("en/context", 0.01, "max"),
    ("en/paws-", 0.05, "max"),
    ("zh/paws-", 0.05, "max"),
    ("en/paraphrase+", 0.60, "min"),
    ("zh/positives+", 0.60, "min"),
    # the questions written in Chinese (bench/data/zh_written_questions.jsonl)
    ("zhw/positives+", 0.60, "min"),
)


def goals(rates: dict[str, float]) -> list[dict[str, Any]]:
    out = []
    for kind, bound, how in GOALS:
        got = rates.get(kind)
        met = None if got is None else got <= bound if how == "max" else got >= bound
        out.append(
            {
                "kind": kind,
                "goal": f"{'<=' if how == 'max' else '>='} {bound}",
                "got": got,
                "met": met,
            }
        )
    return out


def table(result: dict[str, Any]) -> str:
    names = list(result["embedders"])
    head = f"{'lang/kind':22} {'n':>5}" + "".join(
        f" | {n[:8] + ' old':>12} {'retr':>6} {'+verif':>6}" for n in names
    )
    lines = [
        f"eval split only; verifier cut {result['verifier_cut']:.4f} "
        f"(target misfire {result['target_misfire_rate']}); retrieval T: "
        + ", ".join(f"{n} {e['retrieval_threshold']:.2f}" for n, e in result["embedders"].items()),
        "served share (misfire rate for negatives, recall for kinds ending in +)",
        head,
    ]
    rows = sorted({k for e in result["embedders"].values() for k in e["verifier"]})
    for k in rows:
        cells = "".join(
            f" | {e['old_default'].get(k, float('nan')):>12.3f} "
            f"{e['retrieval_only'].get(k, float('nan')):>6.3f} "
            f"{e['verifier'].get(k, float('nan')):>6.3f}"
            for e in result["embedders"].values()
        )
        lines.append(f"{k:22} {result['counts'].get(k, 0):>5}{cells}")
    return "\n".join(lines)


# What must be equal for two runs' embedder columns to describe the same pairs.
_SAME_RUN = (
    "split",
    "dtype",
    "threshold_chosen_on",
    "pairs",
    "cal_pairs",
    "counts",
    "verifier_cut",
)
#: What a file written before a key existed meant by it.
_BEFORE = {"dtype": "float32"}


def merge_previous(result: dict[str, Any], path: Path) -> dict[str, Any]:
    """Keep the columns of embedders this run did not evaluate from an earlier results
    file, but only when that file scored the very same pairs with the same verifier
    cut; otherwise it is replaced whole (columns over different samples would read as
    one table)."""
    if not path.exists():
        return result
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return result
    if not isinstance(earlier, dict) or any(
        earlier.get(k, _BEFORE.get(k)) != result.get(k, _BEFORE.get(k)) for k in _SAME_RUN
    ):
        print(f"{path}: earlier results describe other pairs; replacing them")
        return result
    kept = {k: v for k, v in earlier.get("embedders", {}).items() if k not in result["embedders"]}
    if kept:
        print(f"{path}: keeping the earlier columns of {', '.join(sorted(kept))}")
    return result | {"embedders": kept | result["embedders"]}
