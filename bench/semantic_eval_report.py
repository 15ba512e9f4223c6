"""Output of the semantic-cache evaluation: the threshold plot and the markdown table.
See bench/semantic_eval.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.semantic_data import CONTEXT, ENTITY, HARD, POSITIVE, POSITIVE_RANDOM
from bench.semantic_eval_scoring import GOAL_MISFIRE, GOAL_POSITIVES

KEY_THRESHOLDS = [0.75, 0.80, 0.85, 0.88, 0.90, 0.92, 0.95]
LABELS = {
    POSITIVE: "positives (nearest same-intent)",
    POSITIVE_RANDOM: "positives (random same-intent)",
    HARD: "hard negatives (neighbouring intent)",
    ENTITY: "entity negatives (one value changed)",
    CONTEXT: "context negatives (bare follow-ups)",
    "negatives": "all negatives",
}
COLORS = {
    POSITIVE: "tab:green",
    POSITIVE_RANDOM: "tab:olive",
    HARD: "tab:red",
    ENTITY: "tab:purple",
    CONTEXT: "tab:blue",
    "negatives": "tab:gray",
}


def plot(rows: list[dict[str, Any]], chosen: float, sizes: dict[str, int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ts = [r["threshold"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 6.2))
    for kind in (POSITIVE, POSITIVE_RANDOM):
        for mode, style in (("validators", "-"), ("raw", "--")):
            label = f"{LABELS[kind]}, {'with' if mode != 'raw' else 'without'} validators"
            values = [r[mode][kind] for r in rows]
            left.plot(ts, values, style, color=COLORS[kind], lw=2, label=label)
    left.axhline(GOAL_POSITIVES, color="black", ls=":", lw=1, label="goal: ≥ 60% of positives")
    left.set_title("Hit rate on positives (higher is better)")
    left.set_ylabel("share of positive pairs served from the cache")
    left.set_ylim(0, 1.02)
    for kind in (HARD, ENTITY, CONTEXT, "negatives"):
        for mode, style in (("validators", "-"), ("raw", "--")):
            values = [max(r[mode][kind], 1e-4) for r in rows]
            label = f"{LABELS[kind]}, {'with' if mode != 'raw' else 'without'} validators"
            width = 2 if kind != "negatives" else 1.2
            right.plot(ts, values, style, color=COLORS[kind], lw=width, label=label)
    right.axhline(GOAL_MISFIRE, color="black", ls=":", lw=1, label="goal: ≤ 1% misfires")
    right.set_yscale("log")
    right.set_ylim(8e-5, 1.1)
    right.set_title("Misfire rate on negatives (lower is better; log scale, 0 drawn at 1e-4)")
    right.set_ylabel("share of negative pairs that would be served")
    for ax in (left, right):
        ax.axvline(chosen, color="tab:orange", lw=2, alpha=0.8)
        ax.text(
            chosen,
            0.02 if ax is left else 1.5e-4,
            f" default {chosen:.2f}",
            color="tab:orange",
            fontsize=10,
            fontweight="bold",
        )
        ax.set_xlabel("cosine similarity threshold")
        ax.set_xlim(min(ts), max(ts))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7.5, loc="lower left")
    counts = ", ".join(f"{k} {n}" for k, n in sizes.items())
    fig.suptitle(
        "cachegate semantic cache, all-MiniLM-L6-v2: solid = with validators (entity checks), "
        f"dashed = without\npairs: {counts}",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    print(f"wrote {path}")


def table(rows: list[dict[str, Any]], chosen: float) -> str:
    keys = sorted(set(KEY_THRESHOLDS) | {chosen})
    head = (
        "| threshold | positives hit (val / raw) | random same-intent hit (val) "
        "| hard misfire (val / raw) | entity misfire (val / raw) "
        "| context misfire (val / raw) | all negatives (val) | positives hit (all guards) |"
    )
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        if r["threshold"] not in keys:
            continue
        v, w = r["validators"], r["raw"]
        mark = " **(default)**" if r["threshold"] == chosen else ""
        lines.append(
            f"| {r['threshold']:.2f}{mark} | {v[POSITIVE]:.1%} / {w[POSITIVE]:.1%} "
            f"| {v[POSITIVE_RANDOM]:.1%} | {v[HARD]:.2%} / {w[HARD]:.2%} "
            f"| {v[ENTITY]:.2%} / {w[ENTITY]:.2%} | {v[CONTEXT]:.2%} / {w[CONTEXT]:.2%} "
            f"| {v['negatives']:.2%} | {r['all_guards'][POSITIVE]:.1%} |"
        )
    return "\n".join(lines)
