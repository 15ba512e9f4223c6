"""The report as one self-contained HTML page: inline CSS, figures as base64 PNG
``data:`` images, no script, no external resource (a Content-Security-Policy
says so). Every value that came from a request (questions, prompts, tenant
ids) is HTML-escaped.
"""

from __future__ import annotations

import base64
from html import escape
from typing import Any

from gateway.reports.plots import MISSING_NOTE
from gateway.reports.text import (
    fmt_bytes,
    fmt_edge,
    fmt_flops,
    fmt_ms,
    fmt_pct,
    headline,
    tenants_left_out,
)
from gateway.reports.verifier_section import verifier_html

CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(240px, 1fr)); gap: .6rem; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: .6rem .8rem; background: #fafafa; }
.card b { display: block; font-size: 1.25rem; } .card span { color: #555; font-size: .85rem; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
td, th { border: 1px solid #ddd; padding: .25rem .5rem; text-align: right; }
th { background: #f0f0f0; } td.l, th.l { text-align: left; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #eee; }
.finding { border-left: 4px solid #d9822b; padding: .3rem .8rem; margin: .8rem 0; }
.finding { background: #fffaf3; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .4rem; font-size: .8rem; }
.muted { color: #666; font-size: .85rem; }
"""

FIGURES = (
    ("misfire_vs_threshold", "Misfire rate vs similarity threshold"),
    ("score_histogram", "Score histogram of hits vs misfires"),
    ("hit_rates_over_time", "Hit rates over time"),
    ("cache_memory", "Cache memory over time"),
)


def _caption(name: str, caption: str, s: dict[str, Any]) -> str:
    """A figure's caption; the score histogram's says how many hits it left out."""
    others = s["traffic"].get("hit_scores_other_embedders", 0)
    if name == "score_histogram" and others:  # on another (or an unknown) embedder's scale
        return f"{caption}; {others} hits under other embedders not drawn"
    return caption


def _card(title: str, value: str, note: str = "") -> str:
    return (
        f'<div class="card"><span>{escape(title)}</span><b>{escape(value)}</b>'
        f"<span>{escape(note)}</span></div>"
    )


def _ci(m: dict[str, Any]) -> str:
    if m.get("wilson_low") is None:
        return "no labelled samples"
    return f"95% Wilson CI {fmt_pct(m['wilson_low'])} – {fmt_pct(m['wilson_high'])}"


def _cards(report: dict[str, Any]) -> str:
    s, eng = report["summary"], report["engine"]
    t, m, pre, ttft, sav = s["traffic"], s["misfires"], s["prefix"], s["ttft_ms"], s["savings"]
    rec = s["recommended_threshold"]
    on, off = ttft["cache_on"], ttft["cache_off"]
    rec_value = f"{rec['threshold']:.4f}" if rec["threshold"] is not None else "not yet"
    rec_note = f"target {fmt_pct(rec['target'])} ({rec['criterion']})"
    setting, knob = rec.get("setting"), rec.get("knob", "threshold")
    if setting is not None and (knob != "threshold" or setting != rec["threshold"]):
        why = " (scores on e5's scale)" if setting != rec["threshold"] else ""
        rec_note += f"; set {knob} {setting:.4f}{why}"
    if rec["threshold"] is None and rec.get("reason"):
        rec_note += f": {rec['reason']}"
    others = (s.get("scores") or {}).get("other_embedders", 0)
    if others:  # their scores are on another (or an unknown) embedder's scale
        rec_note += f"; {others} labelled samples of another embedder (or unknown) left out"
    latest = eng.get("latest") or {}
    cards = [
        _card(
            "Semantic hit rate",
            fmt_pct(t["semantic_hit_rate"]),
            f"{t['semantic_hits']} of {t['requests']} requests; "
            f"{fmt_pct(t['eligible_hit_rate'])} of lookups",
        ),
        _card(
            "Misfire rate",
            fmt_pct(headline(m)["rate"]),
            (
                "unweighted; "
                if m.get("weighted") is None
                else f"weighted by sampling {fmt_pct(m['weighted']['rate'])} "
                f"({_ci(m['weighted'])}); among the samples {fmt_pct(m['rate'])}; "
            )
            + f"{m['misfires']} of {m['labelled']} labelled; {_ci(m)}; {m['pending']} pending",
        ),
        _card("Recommended threshold", rec_value, rec_note),
        _card(
            "Prefix hit rate (tokens | requests)",
            f"{fmt_pct(pre['token_hit_rate'])} | {fmt_pct(pre['request_hit_rate'])}",
            f"{pre['cached_tokens']} of {pre['prompt_tokens']} prompt tokens reused",
        ),
        _card(
            "TTFT p50 / p99, cache on",
            f"{fmt_ms(on['p50'])} / {fmt_ms(on['p99'])}",
            f"{on['count']} requests that reused something",
        ),
        _card(
            "TTFT p50 / p99, cache off",
            f"{fmt_ms(off['p50'])} / {fmt_ms(off['p99'])}",
            f"{off['count']} requests with a full prefill",
        ),
        _card(
            "Evictions",
            "–" if eng["evictions"] is None else str(eng["evictions"]),
            f"{eng['snapshots']} engine snapshots",
        ),
        _card(
            "KV memory cached / used",
            f"{fmt_bytes(latest.get('cached_bytes'))} / {fmt_bytes(latest.get('used_bytes'))}",
            f"pool {fmt_bytes(latest.get('total_bytes'))}",
        ),
        _card(
            "Prefill FLOPs saved",
            fmt_flops(sav["prefill_flops_saved"]),
            f"{sav['prompt_tokens_saved']} prompt tokens not recomputed",
        ),
        _card(
            "Cost saved",
            f"${sav['cost_saved_usd']:.4f}",
            f"at ${report['params']['price_per_million_prompt_tokens']:g}/1M prompt tokens",
        ),
    ]
    return '<div class="cards">' + "".join(cards) + "</div>"


def _table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    head = "".join(
        f'<th class="{"l" if i < left else ""}">{escape(h)}</th>' for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"l" if i < left else ""}">{escape(c)}</td>' for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _bucket_name(b: dict[str, Any]) -> str:
    if b["low"] is None:
        name = f"< {fmt_edge(b['high'])}"
        setting = None if b.get("setting_high") is None else f"< {fmt_edge(b['setting_high'])}"
    else:
        name = f"{fmt_edge(b['low'])} – {fmt_edge(b['high'])}"
        setting = (
            None
            if b.get("setting_high") is None
            else f"{fmt_edge(b['setting_low'])} – {fmt_edge(b['setting_high'])}"
        )
    # on the routed scale: the same range as the threshold values a policy takes
    return name if setting is None else f"{name} (setting {setting})"


def _buckets(s: dict[str, Any]) -> str:
    rows = [
        [
            _bucket_name(b),
            str(b["n"]),
            str(b["k"]),
            fmt_pct(b["rate"]),
            "–"
            if b["wilson_low"] is None
            else f"{fmt_pct(b['wilson_low'])} – {fmt_pct(b['wilson_high'])}",
        ]
        for b in s["score_buckets"]
    ]
    return _table(["score bucket", "labelled", "misfires", "rate", "95% Wilson"], rows)


def _findings(findings: list[dict[str, Any]]) -> str:
    if not findings:
        return '<p class="muted">No prefix anti-pattern found in the recent prompts.</p>'
    parts = []
    for f in findings:
        who = f" — tenant {f['tenant']}" if "tenant" in f else ""
        subtypes = ", ".join(f"{k}: {v}" for k, v in f["subtypes"].items())
        examples = "".join(
            f"<pre>first differing token: {e['first_diff_token']}\n"
            f"A: {escape(e['a'])}\nB: {escape(e['b'])}\n"
            f"differs: {escape(e['differs_a'])!s} ≠ {escape(e['differs_b'])}</pre>"
            for e in f["examples"]
        )
        parts.append(
            f'<div class="finding"><b>{escape(f["title"])}{escape(who)}</b>'
            f"<p>{escape(f['advice'])}</p>"
            f"<p>{f['pairs']} of {f['pairs_checked']} prompt pairs; {escape(subtypes)}; first "
            f"differing token at {f['first_diff_token']} ({escape(f['tokenizer'])} tokens); "
            f"reused now {f['reused_tokens_now']}, if fixed {f['reusable_tokens_if_fixed']}: "
            f"<b>+{f['gain_tokens_per_request']} tokens per request</b></p>{examples}</div>"
        )
    return "".join(parts)


def _to_set(rec: dict[str, Any]) -> str:
    """The policy field and value to set, as the summary card says it: the raw score was
    shown, which under ``auto`` is on e5's scale, not the value of the field (a review)."""
    if rec["threshold"] is None:
        return "–"
    setting, knob = rec.get("setting"), rec.get("knob", "threshold")
    return f"{rec['threshold']:.4f}" if setting is None else f"{knob} {setting:.4f}"


def _tenants(report: dict[str, Any]) -> str:
    rows = []
    for tid, s in report["tenants"].items():
        rows.append(
            [
                tid,
                str(s["traffic"]["requests"]),
                fmt_pct(s["traffic"]["semantic_hit_rate"]),
                f"{s['misfires']['misfires']}/{s['misfires']['labelled']}",
                fmt_pct(headline(s["misfires"])["rate"]),
                _ci(headline(s["misfires"])).replace("95% Wilson CI ", ""),
                _to_set(s["recommended_threshold"]),
                fmt_pct(s["prefix"]["token_hit_rate"]),
                fmt_pct(s["prefix"]["request_hit_rate"]),
                fmt_ms(s["ttft_ms"]["cache_on"]["p50"]),
                fmt_ms(s["ttft_ms"]["cache_off"]["p50"]),
                str(len(s["antipatterns"])),
            ]
        )
    if not rows:
        return ""
    headers = [
        "tenant",
        "requests",
        "semantic hit",
        "misfires",
        "misfire rate",
        "95% Wilson",
        "recommended setting",
        "prefix tok",
        "prefix req",
        "TTFT p50 on",
        "TTFT p50 off",
        "findings",
    ]
    left_out = " ".join(tenants_left_out(report)).strip()
    note = f"<p>{escape(left_out)}</p>" if left_out else ""
    return "<h2>Per tenant</h2>" + note + _table(headers, rows)


def render(report: dict[str, Any], figures: dict[str, bytes]) -> str:
    s, scope = report["summary"], report["scope"]
    who = f"tenant {scope['tenant']}" if scope["tenant"] else "all tenants"
    captions = [(name, _caption(name, caption, s)) for name, caption in FIGURES]
    imgs = "".join(
        f'<figure><img alt="{escape(caption)}" id="fig-{name}" '
        f'src="data:image/png;base64,{base64.b64encode(figures[name]).decode("ascii")}">'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
        for name, caption in captions
        if name in figures
    )
    if not figures:  # a core install without matplotlib: say how to get the figures
        imgs = f'<p class="muted" id="no-figures">{escape(MISSING_NOTE)}</p>'
    sh = s["shadow"]
    defs = "".join(
        f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in report["definitions"].items()
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cachegate misfire report — {escape(who)}</title><style>{STYLE}</style></head>
<body>
<h1>cachegate misfire &amp; cache report — {escape(who)}</h1>
<p class="muted">Window: since {escape(scope["since"])} ({scope["hours"]:g} h);
generated {escape(report["generated_at"])}{"; rows truncated" if report["truncated"] else ""}.</p>
{_cards(report)}
<h2>Figures</h2>{imgs}
<h2>Misfire rate by score bucket</h2>{_buckets(s)}
<h2>Shadow verification</h2>
<p>{sh["verified"]} verified: {sh["agree"]} agree, {sh["disagree"]} disagree;
agreement with human labels {fmt_pct(sh["agreement_with_humans"])}
over {sh["with_human_label"]} labelled; the shadow agreed with
{sh["agree_on_labelled_misfires"]} of the {sh["labelled_misfires"]} hits labelled misfire.</p>
<h2>Prefix anti-patterns</h2>{_findings(s["antipatterns"])}
{verifier_html(report.get("verifier"))}
{_tenants(report)}
<h2>Definitions</h2><dl class="muted">{defs}</dl>
</body></html>
"""
