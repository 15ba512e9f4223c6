"""The report's figures, rendered server-side with matplotlib's Agg canvas into PNG
bytes (inlined as base64 ``data:`` images, so the page needs no script and no network).

Figures are built on ``matplotlib.figure.Figure`` directly, never pyplot, so
rendering holds no global state and is safe from worker threads. Every function
takes the report's JSON pieces and returns PNG bytes; with no data the figure
says so instead of being left out.

matplotlib is the ``[reports]`` extra, imported only when a figure is drawn: a
core install serves the report page without figures (and says how to get them)
rather than failing the request.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SIZE = (7.0, 3.4)
DPI = 100
#: Shown on the report page in place of the figures when matplotlib is missing.
MISSING_NOTE = "Figures need matplotlib: pip install 'cachegate[reports]'."


def available() -> bool:
    """True when matplotlib can be imported (the ``[reports]`` extra is installed)."""
    return importlib.util.find_spec("matplotlib") is not None


def _figure() -> tuple[Figure, Any]:
    # Imported here, not at module level, so a core install can import the report API.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=SIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _empty(ax: Any, title: str, message: str) -> None:
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#666")
    ax.set_xticks([])
    ax.set_yticks([])


def misfire_vs_threshold(
    curve: Sequence[dict[str, Any]], target: float, recommended: float | None
) -> bytes:
    fig, ax = _figure()
    title = "Misfire rate of labelled hits at or above each threshold"
    if not curve:
        _empty(ax, title, "no labelled samples yet")
        return _png(fig)
    # The last step runs to 1.0 (a step "post" ends at its point: one label drew nothing).
    x = [p["threshold"] for p in curve] + [max(1.0, curve[-1]["threshold"])]
    low = [p["wilson_low"] for p in curve] + [curve[-1]["wilson_low"]]
    high = [p["wilson_high"] for p in curve] + [curve[-1]["wilson_high"]]
    rate = [p["rate"] for p in curve] + [curve[-1]["rate"]]
    ax.fill_between(x, low, high, alpha=0.2, color="tab:red", step="post",
                    label="95% Wilson interval")  # fmt: skip
    ax.step(x, rate, where="post", color="tab:red", marker="o", markersize=3,
            label="misfire rate")  # fmt: skip
    ax.axhline(target, color="black", linestyle="--", linewidth=1, label=f"target {target:g}")
    if recommended is not None:
        ax.axvline(
            recommended, color="tab:green", linewidth=1.5, label=f"recommended {recommended:.3f}"
        )
    ax.set_xlabel("similarity threshold")
    ax.set_ylabel("misfire rate")
    # From the rates: at 0..1 a 1% target and rates of 1-3% all sat on the bottom spine.
    # The interval of the last few labels (near 1.0) is clipped rather than let set it.
    ax.set_ylim(0, min(1.0, max(4 * target, 1.5 * max(rate))) * 1.1)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    return _png(fig)


def score_histogram(
    hit_scores: Sequence[float],
    correct: Sequence[float],
    misfire: Sequence[float],
    other_embedders: int = 0,
) -> bytes:
    """``other_embedders``: hits scored by another embedder (or unknown), not drawn: the
    legend says so, as "all hits" would claim every one."""
    fig, ax = _figure()
    title = "Similarity scores: all semantic hits vs labelled samples"
    everything = [*hit_scores, *correct, *misfire]
    if not everything:
        _empty(ax, title, "no semantic hits yet")
        return _png(fig)
    lo = min(everything)
    hi = max(1.0, max(everything))
    bins = [lo + (hi - lo) * i / 20 for i in range(21)] if hi > lo else 10
    # Labelled samples on an axis of their own: at a 5% sample rate they were a fiftieth
    # of the hit bars on one axis, and 20 misfires did not show.
    labels_ax = ax.twinx() if hit_scores and (correct or misfire) else ax
    if hit_scores:
        label = "all hits (left axis)" if labels_ax is not ax else "all hits"
        if other_embedders:
            label += f"; {other_embedders} under other embedders not drawn"
        ax.hist(hit_scores, bins=bins, histtype="step", color="tab:blue", label=label)
    if correct:
        labels_ax.hist(correct, bins=bins, alpha=0.6, color="tab:green", label="labelled correct")
    if misfire:
        labels_ax.hist(misfire, bins=bins, alpha=0.7, color="tab:red", label="labelled misfire")
    if labels_ax is not ax:
        labels_ax.set_ylabel("labelled samples")
        handles = ax.get_legend_handles_labels()
        more = labels_ax.get_legend_handles_labels()
        labels_ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=8, loc="upper left")
    ax.set_xlabel("similarity score")
    ax.set_ylabel("hits" if labels_ax is not ax else "count")
    ax.set_title(title)
    if labels_ax is ax:  # else one legend for both axes, above
        ax.legend(fontsize=8, loc="upper left")
    return _png(fig)


def hit_rates_over_time(timeline: Sequence[dict[str, Any]]) -> bytes:
    fig, ax = _figure()
    title = "Hit rates over time"
    if not timeline:
        _empty(ax, title, "no requests recorded yet")
        return _png(fig)
    t = [datetime.fromisoformat(p["start"]) for p in timeline]
    for key, label in (
        ("semantic_hit_rate", "semantic hit rate"),
        ("prefix_token_hit_rate", "prefix token hit rate"),
        ("prefix_request_hit_rate", "prefix request hit rate"),
    ):
        ax.plot(
            t,
            [p[key] if p[key] is not None else float("nan") for p in timeline],
            marker="o",
            markersize=3,
            label=label,
        )
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("rate")
    ax.set_xlabel("time (UTC)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    fig.autofmt_xdate()
    return _png(fig)


def cache_memory(memory: Sequence[dict[str, Any]]) -> bytes:
    fig, ax = _figure()
    title = "Prefix cache KV memory (a rising floor of 'used' is a leak)"
    if not memory:
        _empty(ax, title, "no engine snapshots yet")
        return _png(fig)
    t = [datetime.fromisoformat(m["at"]) for m in memory]
    mib = 1024 * 1024
    ax.plot(t, [m["cached_bytes"] / mib for m in memory], label="cached (findable)")
    ax.plot(t, [m["used_bytes"] / mib for m in memory], label="used (referenced)")
    ax.plot(t, [m["total_bytes"] / mib for m in memory], linestyle="--", color="gray", label="pool")
    ax.set_ylabel("MiB")
    ax.set_xlabel("time (UTC)")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    fig.autofmt_xdate()
    return _png(fig)


def render_all(report: dict[str, Any]) -> dict[str, bytes]:
    """The four figures of a report's summary, by name; none without matplotlib."""
    if not available():
        return {}
    s = report["summary"]
    rec = s["recommended_threshold"]
    return {
        "misfire_vs_threshold": misfire_vs_threshold(
            s["threshold_curve"], rec["target"], rec["threshold"]
        ),
        "score_histogram": score_histogram(
            s["traffic"]["hit_scores"],
            s["labelled_scores"]["correct"],
            s["labelled_scores"]["misfire"],
            s["traffic"].get("hit_scores_other_embedders", 0),
        ),
        "hit_rates_over_time": hit_rates_over_time(s["timeline"]),
        "cache_memory": cache_memory(report["engine"]["memory"]),
    }
