"""The comparison table (with ours / vLLM ratios) and plot of bench/vs_vllm.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    name: str
    unit: str
    higher_is_better: bool
    values: dict[str, float | None]  # column label → value (None: not measured)


def _get(result: dict[str, Any], *path: str) -> float | None:
    node: Any = result
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return float(node) if node is not None else None


def rows(engines: dict[str, dict[str, Any]]) -> list[Row]:
    """One row per reported figure, in the order of the issue's tables."""
    spec: list[tuple[str, str, bool, tuple[str, ...]]] = [
        ("cold TTFT", "s", False, ("ttft", "cold_median_s")),
        ("prefix-hit TTFT", "s", False, ("ttft", "hit_median_s")),
        ("1 stream decode", "tok/s", True, ("decode", "decode_tokens_per_s")),
    ]
    waves: list[str] = []
    for result in engines.values():
        for n in result.get("concurrent", {}):
            if n not in waves:
                waves.append(n)
    for n in sorted(waves, key=int):
        spec += [
            (f"{n} streams output", "tok/s", True, ("concurrent", n, "output_tokens_per_s")),
            (f"{n} streams TTFT p50", "s", False, ("concurrent", n, "ttft_p50_s")),
            (f"{n} streams TTFT p99", "s", False, ("concurrent", n, "ttft_p99_s")),
        ]
    return [
        Row(name, unit, hib, {label: _get(r, *path) for label, r in engines.items()})
        for name, unit, hib, path in spec
    ]


def ratio(ours: float | None, reference: float | None) -> float | None:
    if ours is None or reference is None or reference == 0:
        return None
    return ours / reference


def at_least_as_good(row: Row, ours: float | None, reference: float | None) -> bool | None:
    """Whether ``ours`` meets the reference in the row's direction (None: unknown)."""
    if ours is None or reference is None:
        return None
    return ours >= reference if row.higher_is_better else ours <= reference


def _fmt(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"


def markdown_table(table: list[Row], columns: list[str], reference: str | None) -> str:
    """Markdown: a value column per engine, then ``ours / reference`` per other engine.

    A ratio is marked ✓ when that engine is at least as good as the reference on
    the row (lower TTFT, higher tokens/s), ✗ otherwise.
    """
    others = [c for c in columns if c != reference] if reference else []
    head = ["workload", "unit", *columns, *(f"{c} / {reference}" for c in others)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table:
        cells = [row.name, row.unit, *(_fmt(row.values.get(c)) for c in columns)]
        for c in others:
            assert reference is not None
            ours, ref = row.values.get(c), row.values.get(reference)
            r = ratio(ours, ref)
            good = at_least_as_good(row, ours, ref)
            mark = "" if good is None else (" ✓" if good else " ✗")
            cells.append(f"{r:.2f}×{mark}" if r is not None else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(table: list[Row], columns: list[str], path: Path, title: str) -> Path:
    """One small bar chart per row (their units differ), one bar per engine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ncols = 3
    nrows = (len(table) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.0 * nrows), squeeze=False)
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"]
    for i, row in enumerate(table):
        ax = axes[i // ncols][i % ncols]
        vals = [row.values.get(c) for c in columns]
        xs = list(range(len(columns)))
        bars = ax.bar(xs, [v or 0.0 for v in vals], color=colors[: len(columns)])
        for bar, v in zip(bars, vals, strict=True):
            ax.annotate(
                _fmt(v),
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        better = "higher" if row.higher_is_better else "lower"
        ax.set_title(f"{row.name} ({row.unit}, {better} is better)", fontsize=9)
        ax.set_xticks(xs)
        ax.set_xticklabels(columns, fontsize=8, rotation=10)
        ax.margins(y=0.15)
    for j in range(len(table), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}", flush=True)
    return path
