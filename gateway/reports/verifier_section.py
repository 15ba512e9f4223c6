"""The report's verifier section: per tenant, the error bound it set, the misfire
estimate with its 95% interval, and the verifier cut in force (issue 12, part 3).

The cut is what the running gateway's lookups use (:mod:`gateway.calibration`,
recomputed from the database here, so a label just written shows at once); the
estimate is the misfire rate among the tenant's labelled samples the cut would
serve (score above it), with its Wilson interval. Without the verifier
(``CACHEGATE_VERIFIER=off``) the section says so and shows no cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

from gateway.reports.text import fmt_pct
from gateway.state import GatewayState

#: Tenants shown in the section (as the report's per-tenant sections).
MAX_TENANTS = 50


def verifier_section(gw: GatewayState, tenant_ids: Iterable[str]) -> dict[str, Any]:
    """``{"enabled": bool, "tenants": {id: CutInForce as a dict + retrieval_threshold}}``."""
    verification = gw.pipeline.verification
    if verification is None:
        return {"enabled": False, "tenants": {}}
    out: dict[str, Any] = {}
    for tid in sorted(set(tenant_ids))[:MAX_TENANTS]:
        policy, _version = gw.tenants.policy(tid)
        cut = verification.calibrator.refresh(tid, policy.target_misfire_rate)
        out[tid] = cut.to_dict() | {"retrieval_threshold": verification.retrieval_threshold(policy)}
    return {"enabled": True, "tenants": out}


def verifier_html(section: dict[str, Any] | None) -> str:
    """The section as an HTML table (empty when the report has none)."""
    if not section:
        return ""
    if not section["enabled"]:
        return '<h2>Pair verifier</h2><p class="muted">off (CACHEGATE_VERIFIER=off)</p>'
    rows = []
    for tid, c in section["tenants"].items():
        interval = "–" if c["low"] is None else f"{fmt_pct(c['low'], 2)} – {fmt_pct(c['high'], 2)}"
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{escape(v)}</td>"
                for v in (
                    tid,
                    fmt_pct(c["target"], 2),
                    fmt_pct(c["estimate"], 2),
                    interval,
                    f"{c['misfires']}/{c['served']}",
                    f"{c['cut']:.4f}",
                    str(c["source"]) + (" (kept: labels unreadable)" if c.get("is_kept") else ""),
                    f"{c['retrieval_threshold']:.2f}",
                )
            )
            + "</tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "tenant",
            "target misfire",
            "estimate",
            "95% Wilson",
            "misfires/served",
            "cut in force",
            "cut from",
            "retrieval threshold",
        )
    )
    return (
        '<h2>Pair verifier</h2><table id="verifier"><thead><tr>'
        + head
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )
