"""The report's summary as plain text (``cachegate report``) and the value formatters
shared with the HTML page."""

from __future__ import annotations

from typing import Any


def fmt_pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}%"


def fmt_ms(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f} ms"


def fmt_bytes(x: float | None) -> str:
    if x is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(x) < 1024 or unit == "GiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    raise AssertionError("unreachable")


def fmt_flops(x: float | None) -> str:
    if x is None:
        return "– (model size unknown)"
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f} FLOP"


def _weighted(m: dict[str, Any]) -> str:
    w = m.get("weighted")
    if w is None:
        return "n/a (a sample lacks its sampling probability, or none is labelled)"
    return f"{fmt_pct(w['rate'])}, 95% Wilson {_ci(w)}, effective n {w['n_effective']:.0f}"


def fmt_edge(x: float) -> str:
    """A bucket edge: two decimals, more where the edge has them (the routed scale's
    0.94375 is neither 0.94 nor 0.9437)."""
    text = f"{x:.5f}".rstrip("0")
    return text.ljust(4, "0")  # "1." → "1.00", "0.8" → "0.80"


def _bucket(b: dict[str, Any]) -> str:
    """A score bucket as the report bins it: below the first edge, half-open, and the
    last one closed (it holds the exact repeats at 1.0)."""
    if b["low"] is None:
        return f"<{fmt_edge(b['high'])}"
    close = "]" if b["high"] >= 1.0 else ")"
    return f"[{fmt_edge(b['low'])},{fmt_edge(b['high'])}{close}"


def headline(m: dict[str, Any]) -> dict[str, Any]:
    """The misfire estimate to lead with: weighted by sampling (1 / the probability
    each sample was taken with: the estimate of the share of served hits) where every
    label has its probability, else the plain share of labels. The plain share leans to
    whatever is over-sampled: near-threshold hits, taken 3 times as often, pull it up
    when misfires sit there and down when they do not (stale answers at 1.0); it is no
    bound either way (a review, session 41)."""
    return m["weighted"] if m.get("weighted") is not None else m


def _ci(m: dict[str, Any]) -> str:
    if m.get("wilson_low") is None:
        return "n/a"
    return f"[{fmt_pct(m['wilson_low'])}, {fmt_pct(m['wilson_high'])}]"


def _section(name: str, s: dict[str, Any]) -> list[str]:
    t, m, pre, ttft, sav = s["traffic"], s["misfires"], s["prefix"], s["ttft_ms"], s["savings"]
    rec = s["recommended_threshold"]
    rec_text = (
        f"{rec['threshold']:.4f}"
        if rec["threshold"] is not None
        else f"none ({rec.get('reason') or 'no data'})"
    )
    rec_text += _knob_note(rec)
    on, off = ttft["cache_on"], ttft["cache_off"]
    by_cache = ", ".join(f"{k} {v}" for k, v in t["by_cache"].items())
    lines = [
        f"== {name} ==",
        f"requests              {t['requests']}  ({by_cache or 'none'})",
        f"semantic hit rate     {fmt_pct(t['semantic_hit_rate'])} of requests, "
        f"{fmt_pct(t['eligible_hit_rate'])} of lookups",
        f"misfire rate          {fmt_pct(headline(m)['rate'])}  95% Wilson {_ci(headline(m))}"
        + (" (weighted by sampling)" if m.get("weighted") is not None else " (unweighted)"),
        f"  among the samples   {fmt_pct(m['rate'])}  {m['misfires']}/{m['labelled']} labelled, "
        f"95% Wilson {_ci(m)}, {m['pending']} pending",
        f"  weighted by sampling {_weighted(m)}",
        f"recommended threshold {rec_text}  (target {fmt_pct(rec['target'])}, {rec['criterion']})",
        f"prefix hit rate       tokens {fmt_pct(pre['token_hit_rate'])}  |  "
        f"requests {fmt_pct(pre['request_hit_rate'])}",
        f"TTFT p50/p99          cache on {fmt_ms(on['p50'])}/{fmt_ms(on['p99'])} (n={on['count']})"
        f"  |  cache off {fmt_ms(off['p50'])}/{fmt_ms(off['p99'])} (n={off['count']})",
        f"saved                 {sav['prompt_tokens_saved']} prompt tokens, "
        f"prefill {fmt_flops(sav['prefill_flops_saved'])}, ${sav['cost_saved_usd']:.4f}",
    ]
    buckets = [b for b in s["score_buckets"] if b["n"]]
    if buckets:
        lines.append(
            "score buckets         " + "  ".join(f"{_bucket(b)} {b['k']}/{b['n']}" for b in buckets)
        )
    for f in s.get("antipatterns", []):
        who = f" [{f['tenant']}]" if "tenant" in f else ""
        lines.append(
            f"anti-pattern{who}: {f['title']}: {f['pairs']}/{f['pairs_checked']} pairs, first "
            f"difference at token {f['first_diff_token']}, +{f['gain_tokens_per_request']} "
            f"tokens/request reusable if fixed"
        )
    return lines


def _knob_note(rec: dict[str, Any]) -> str:
    """Which policy field to set, and to what, when either is not plain ``threshold``
    at the score shown (the verifier on: ``retrieval_threshold``; e5's scale: a
    MiniLM cosine)."""
    setting, knob = rec.get("setting"), rec.get("knob", "threshold")
    if setting is None or (knob == "threshold" and setting == rec["threshold"]):
        return ""
    why = ": scores are on e5's scale" if setting != rec["threshold"] else ""
    return f" (set {knob} {setting:.4f}{why})"


def verifier_lines(section: dict[str, Any] | None) -> list[str]:
    """The report's pair-verifier section as text: per tenant, the target it set, the
    misfire estimate among what the cut serves with its 95% interval, and the cut in
    force with where it comes from (the page's table, gateway/reports/verifier_section.py)."""
    if not section:
        return []
    if not section["enabled"]:
        return ["pair verifier: off (CACHEGATE_VERIFIER=off)"]
    lines = ["pair verifier (per tenant: target, estimate, 95% Wilson, cut in force):"]
    for tid, c in section["tenants"].items():
        interval = "–" if c["low"] is None else f"[{fmt_pct(c['low'])}, {fmt_pct(c['high'])}]"
        kept = " (kept: labels unreadable)" if c.get("is_kept") else ""
        lines.append(
            f"  {tid}: target {fmt_pct(c['target'])}, estimate {fmt_pct(c['estimate'])} "
            f"{interval} ({c['misfires']}/{c['served']} served labels), cut "
            f"{c['cut']:.4f} from {c['source']}{kept}, retrieval threshold "
            f"{c['retrieval_threshold']:.2f}"
            + (
                f"; {below} labels below it not counted"
                if (below := c.get("labels_below_threshold"))
                else ""
            )
        )
    return lines


def format_summary(report: dict[str, Any]) -> str:
    scope = report["scope"]
    eng = report["engine"]
    latest = eng.get("latest") or {}
    lines = [
        f"cachegate report: {scope['tenant'] or 'all tenants'}, last {scope['hours']:g} h "
        f"(since {scope['since']})",
        "",
        *_section(scope["tenant"] or "overall", report["summary"]),
        "",
        f"engine: evictions {eng['evictions'] if eng['evictions'] is not None else '–'}, "
        f"KV cached {fmt_bytes(latest.get('cached_bytes'))}, used "
        f"{fmt_bytes(latest.get('used_bytes'))} of {fmt_bytes(latest.get('total_bytes'))} "
        f"({eng['snapshots']} snapshots)",
    ]
    if report.get("truncated"):
        lines.append("rows truncated: the counts cover the newest rows of the window only")
    verifier = verifier_lines(report.get("verifier"))
    if verifier:
        lines += ["", *verifier]
    for tid, s in report.get("tenants", {}).items():
        lines += ["", *[ln for ln in _section(f"tenant {tid}", s) if "anti-pattern" not in ln]]
    lines += tenants_left_out(report)
    return "\n".join(lines)


def tenants_left_out(report: dict[str, Any]) -> list[str]:
    """A line saying how many tenants have no section, when some have none."""
    shown, total = report.get("tenants_shown", 0), report.get("tenants_total", 0)
    if total <= shown:
        return []
    return [
        "",
        f"{shown} of {total} tenants shown (most misfires, then labels, then requests); "
        "ask for one with --tenant",
    ]
