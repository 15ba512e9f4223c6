"""``GET /admin/reports/misfires`` (admin token): the misfire and cache report as an
HTML page (default) or JSON (``format=json``), overall or for one tenant.

Prices come from ``CACHEGATE_PRICE_PER_MILLION_PROMPT_TOKENS`` /
``..._COMPLETION_TOKENS``; the model size (for FLOPs) and the tokenizer (for
anti-pattern token positions) come from the in-process engine, and are absent
(FLOPs ``null``, whitespace tokens) when the upstream is an HTTP server.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.orm import Session

from gateway.admin.auth import require_admin
from gateway.admin.body_check import AdminRoute
from gateway.admin.service import require_row
from gateway.reports.antipatterns import Analyzer, HFTokenizer, Tokenizer
from gateway.reports.build import MAX_TENANT_SECTIONS, ModelShape, ReportParams, build_report
from gateway.reports.html import CSP, render
from gateway.reports.plots import render_all
from gateway.reports.verifier_section import verifier_section
from gateway.review.api import NO_NUL
from gateway.settings import Settings
from gateway.state import GatewayState
from semantic.embedder_routed import knobs_on_e5_scale

#: Seconds one report spends reading prompt pairs for anti-patterns, all tenants together.
ANTIPATTERN_SECONDS = 10.0


def model_shape(gw: GatewayState) -> ModelShape | None:
    if gw.upstream.engine is None:
        return None
    loaded = gw.upstream.engine.loaded
    mc = loaded.config
    return ModelShape(loaded.model_id, loaded.num_params, mc.num_layers, mc.num_heads, mc.head_dim)


def analyzer(gw: GatewayState) -> Analyzer:
    engine = gw.upstream.engine
    if engine is not None:
        tok: Tokenizer = HFTokenizer(engine.loaded.tokenizer)
        return Analyzer(tok, block_size=engine.block_size)
    return Analyzer()  # whitespace tokens; block size unknown: the default 16


def antipattern_findings(gw: GatewayState, tenant: str | None) -> dict[str, list[dict[str, Any]]]:
    if gw.stats is None:
        return {}
    buffer = gw.stats.prompts
    # overall: the most recently active tenants only (each costs a tokenization pass)
    tenants = [tenant] if tenant is not None else buffer.tenants()[-MAX_TENANT_SECTIONS:]
    an = analyzer(gw)
    out = {}
    # one report's analysis is bounded, however the tenants' prompts are shaped: each
    # tenant gets its share, and past it the newest pairs read are what it says
    each = ANTIPATTERN_SECONDS / max(1, len(tenants))
    for tid in tenants:
        findings = an.analyse(buffer.recent(tid), deadline=time.monotonic() + each)
        if findings:
            out[tid] = findings
    return out


def make_report(request: Request, params: ReportParams) -> dict[str, Any]:
    gw: GatewayState = request.app.state.gateway
    if params.tenant is not None:  # a typo was an empty report and an invented cut (s45)
        with Session(request.app.state.db) as s:
            require_row(s, params.tenant)
    findings = antipattern_findings(gw, params.tenant)
    report = build_report(request.app.state.db, params, findings)
    # Each tenant's error bound, misfire estimate and the verifier cut in force.
    shown = [params.tenant] if params.tenant is not None else list(report["tenants"])
    report["verifier"] = verifier_section(gw, shown)
    return report


def report_router(admin: Any = require_admin) -> APIRouter:
    # a database that cannot answer is a 503, as on the other admin routes
    router = APIRouter(prefix="/admin/reports", tags=["reports"], route_class=AdminRoute)

    @router.get(
        "/misfires",
        response_class=HTMLResponse,
        responses={200: {"content": {"application/json": {}}, "description": "HTML or JSON"}},
    )
    async def misfires(
        request: Request,
        tenant: str | None = Query(
            None, max_length=64, pattern=NO_NUL, description="one tenant; all if absent"
        ),
        format: Literal["html", "json"] = Query("html"),
        target: float = Query(0.01, ge=1e-6, lt=1.0, description="target misfire rate"),
        criterion: Literal["wilson_upper", "point"] = Query("wilson_upper"),
        hours: float = Query(168.0, gt=0.0, le=24 * 366, description="window, hours back"),
        _actor: str = Depends(admin),
    ) -> Response:
        """Semantic hit and misfire rates (Wilson CI, score buckets, recommended threshold),
        prefix token/request hit rates, TTFT with cache on/off, evictions, KV memory over
        time, FLOPs and cost saved, and prefix anti-pattern findings."""
        settings: Settings = request.app.state.settings
        gw: GatewayState = request.app.state.gateway
        cache = gw.pipeline.cache
        params = ReportParams(
            tenant=tenant,
            hours=hours,
            target=target,
            criterion=criterion,
            price_prompt=settings.price_per_million_prompt_tokens,
            price_completion=settings.price_per_million_completion_tokens,
            model=model_shape(gw),
            routed=cache is not None and knobs_on_e5_scale(cache.embedder),
            embedder_id=None if cache is None else cache.embedder_id,
            knob="threshold" if gw.pipeline.verification is None else "retrieval_threshold",
        )
        report = await asyncio.to_thread(make_report, request, params)
        if format == "json":
            return JSONResponse(report)
        figures = await asyncio.to_thread(render_all, report)
        return HTMLResponse(render(report, figures), headers={"Content-Security-Policy": CSP})

    return router
