"""The report's verifier section: per tenant, the error bound it set, the misfire
estimate with its 95% interval, and the verifier cut in force (issue 12, part 3).

The cut is what the running gateway's lookups use (:mod:`gateway.calibration`,
recomputed from the database here, so a label just written shows at once); the
estimate is the misfire rate among the tenant's labelled samples the cut would
serve (score above it), with its Wilson interval. Without the verifier
(``CACHEGATE_VERIFIER=off``) the section says so and shows no cut. Labelled samples
scored by a model no longer in force (a retrained one) are counted apart: they do not
refine the cut, and the section says how many there are.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from html import escape
from typing import Any

from gateway.calibration_labels import (
    Retrieval,
    count_labels_below_threshold,
    count_uncounted_labels,
)
from gateway.calibrator import Calibrator
from gateway.reports.text import fmt_pct
from gateway.state import GatewayState

log = logging.getLogger("cachegate.gateway.reports")

#: Tenants shown in the section (as the report's per-tenant sections).
MAX_TENANTS = 50


def verifier_section(gw: GatewayState, tenant_ids: Iterable[str]) -> dict[str, Any]:
    """``{"enabled": bool, "tenants": {id: CutInForce as a dict + retrieval_threshold}}``."""
    verification = gw.pipeline.verification
    if verification is None:
        return {"enabled": False, "tenants": {}}
    out: dict[str, Any] = {}
    calibrator = verification.calibrator
    for tid in sorted(set(tenant_ids))[:MAX_TENANTS]:
        policy, _version = gw.tenants.policy(tid)
        retrieval = verification.retrieval(policy)
        cut = calibrator.refresh(tid, policy.target_misfire_rate, retrieval)
        out[tid] = cut.to_dict() | {
            "retrieval_threshold": verification.retrieval_threshold(policy),
            "labels_not_counted": _not_counted(calibrator, tid),
            "labels_below_threshold": _below_threshold(calibrator, tid, retrieval),
        }
    return {"enabled": True, "tenants": out}


def _not_counted(calibrator: Calibrator, tenant_id: str) -> int | None:
    """Labels of models no longer in force, or of no known scale (None: unknown, the
    database away; not asked while the calibrator knows it is away)."""
    if calibrator.db is None or calibrator.verifier_models is None:
        return None
    if calibrator.is_database_away:
        return None
    try:
        return count_uncounted_labels(calibrator.db, tenant_id, calibrator.verifier_models)
    except Exception as exc:  # the cut above says what is known; this is a footnote
        log.warning("uncounted labels not read (%s)", type(exc).__name__)
        return None


def _below_threshold(calibrator: Calibrator, tenant_id: str, retrieval: Retrieval) -> int | None:
    """Labels of hits below the retrieval threshold in force (None: unknown, as above)."""
    if calibrator.db is None or calibrator.is_database_away:
        return None
    try:
        return count_labels_below_threshold(
            calibrator.db, tenant_id, calibrator.verifier_models, retrieval
        )
    except Exception as exc:  # a footnote, as the labels on old scales
        log.warning("labels below the threshold not read (%s)", type(exc).__name__)
        return None


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
                    _count(c.get("labels_not_counted")),
                    _count(c.get("labels_below_threshold")),
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
            "labels on old scales",
            "labels below the threshold",
        )
    )
    return (
        '<h2>Pair verifier</h2><table id="verifier"><thead><tr>'
        + head
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _count(n: object) -> str:
    return "–" if n is None else str(n)
