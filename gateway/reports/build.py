"""The misfire and cache-efficiency report, per tenant and overall (seed 003, 监控指标).

Built from ``misfire_samples``, ``request_stats`` and ``engine_snapshots`` in a
time window, plus the in-memory anti-pattern findings. Definitions (also in
the report's ``definitions``):

- **semantic hit rate** = semantic-hit requests / all recorded requests;
  ``eligible_hit_rate`` = semantic hits / requests where a lookup ran
  (``x-cachegate-semantic`` is ``hit`` or ``miss:*``, not ``skipped:*``).
- **misfire rate** = labelled misfires / labelled samples (``rate``, the share among
  the samples), with a 95% Wilson interval (:mod:`gateway.reports.stats`), and
  ``weighted``: each sample weighed by 1 / its sampling probability (near-threshold
  hits are sampled ×3, :mod:`gateway.review.sampling`), the estimate of the share of
  served hits, which the page and the text lead with (``text.headline``).
- **prefix token hit rate** = Σ cached_tokens / Σ prompt_tokens, and **prefix
  request hit rate** = requests with cached_tokens > 0 / requests, both over the
  requests the engine served (cache label prefix-hit, miss or bypass; semantic
  hits never reach the engine).
- **TTFT cache on vs off**: *on* = requests that reused something (semantic-hit,
  or prefix-hit: cached_tokens > 0); *off* = requests that reused nothing
  (label miss or bypass, cached_tokens = 0: a full prefill). p50/p99 as in
  :func:`gateway.reports.stats.percentiles`.
- **prefill FLOPs saved** = Σ over reused tokens of 2·N_params·c + 2·L·H·d·c·(c+1)
  (matmuls + causal attention of the c reused positions; L layers, H query heads,
  d head dim), where c = cached_tokens of engine-served requests and c =
  prompt_tokens of semantic hits. Semantic hits also save decode: 2·N_params per
  completion token (``decode_flops_saved``).
- **cost saved** = (Σ reused prompt tokens) × $/1M prompt tokens + (Σ completion
  tokens of semantic hits) × $/1M completion tokens.
- **evictions** = the increase of the pool's eviction counter over the window
  (a counter that went down means a restart: its new value counts).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from gateway.calibration_labels import recorded_probability, sampling_record
from gateway.models import EngineSnapshot, MisfireSample, RequestStat
from gateway.policy import TenantPolicy
from gateway.reports.sections import (
    MAX_TENANT_SECTIONS,
    ModelShape,
    ReportParams,
    Sample,
    Stat,
    engine_section,
    section,
)
from gateway.tenants import latest_policy

log = logging.getLogger("cachegate.gateway.reports")

__all__ = ["MAX_TENANT_SECTIONS", "ModelShape", "ReportParams", "build_report", "load"]


# ---- loading ------------------------------------------------------------------------------


def load(
    db: Engine, p: ReportParams
) -> tuple[list[Sample], list[Stat], list[EngineSnapshot], bool]:
    with Session(db) as s:
        # Only the sampling record of a sample's comparison (its probability), not the
        # whole comparison (~9 KB a row decoded; a week at 5% of 1M hits a day read ~3 GB
        # for one number each: a review, session 44); the newest max_rows, as the stats.
        sq = (
            select(
                MisfireSample.tenant_id,
                MisfireSample.score,
                MisfireSample.label,
                MisfireSample.shadow_verdict,
                sampling_record(),
                MisfireSample.embedder_id,
            )
            .where(MisfireSample.created_at >= p.since)
            .order_by(MisfireSample.created_at.desc())
            .limit(p.max_rows + 1)
        )
        rq = (
            select(
                RequestStat.at,
                RequestStat.tenant_id,
                RequestStat.cache,
                RequestStat.semantic,
                RequestStat.score,
                RequestStat.prompt_tokens,
                RequestStat.cached_tokens,
                RequestStat.completion_tokens,
                RequestStat.ttft_ms,
                RequestStat.embedder_id,
            )
            .where(RequestStat.at >= p.since)
            .order_by(RequestStat.at.desc())
            .limit(p.max_rows + 1)
        )
        if p.tenant is not None:
            sq = sq.where(MisfireSample.tenant_id == p.tenant)
            rq = rq.where(RequestStat.tenant_id == p.tenant)
        samples = [
            Sample(
                tenant, score, label, shadow, recorded_probability({"sampling": drawn}), embedder
            )
            for tenant, score, label, shadow, drawn, embedder in s.execute(sq)
        ]
        # the last by name: at ten columns SQLAlchemy types the row as possibly longer
        stats = [Stat(*row[:9], embedder_id=row.embedder_id) for row in s.execute(rq)]
        # the newest (the "latest" card and the evictions are read from the end)
        snaps = list(
            s.scalars(
                select(EngineSnapshot)
                .where(EngineSnapshot.at >= p.since)
                .order_by(EngineSnapshot.at.desc())
                .limit(p.max_rows + 1)
            )
        )
        s.expunge_all()
    truncated = max(len(stats), len(snaps), len(samples)) > p.max_rows
    samples = samples[: p.max_rows]
    snaps = sorted(snaps[: p.max_rows], key=lambda r: r.at)
    stats = sorted(stats[: p.max_rows], key=lambda r: r.at)
    return samples, stats, snaps, truncated


def _ranked(ids: set[str], samples: list[Sample], stats: list[Stat]) -> list[str]:
    """Tenant ids, most labelled misfires first, then most labels, then most requests
    (then by id): the sections shown are those an operator must see. Alphabetical, the
    tenants with every misfire could fall past the 50th and vanish (a review)."""
    misfires: dict[str, int] = {}
    labels: dict[str, int] = {}
    requests: dict[str, int] = {}
    for x in samples:
        if x.label is not None:
            labels[x.tenant_id] = labels.get(x.tenant_id, 0) + 1
            misfires[x.tenant_id] = misfires.get(x.tenant_id, 0) + (x.label == "misfire")
    for r in stats:
        requests[r.tenant_id] = requests.get(r.tenant_id, 0) + 1
    return sorted(
        ids, key=lambda t: (-misfires.get(t, 0), -labels.get(t, 0), -requests.get(t, 0), t)
    )


def _targets(db: Engine, tenant_ids: list[str]) -> dict[str, float]:
    """Each tenant's ``target_misfire_rate`` as its policy sets it (absent: a tenant with
    no policy, or one whose policy cannot be read, which then takes the query's)."""
    out: dict[str, float] = {}
    with Session(db) as s:
        for tid in tenant_ids:
            row = latest_policy(s, tid)
            try:
                policy = TenantPolicy() if row is None else TenantPolicy.from_stored(row.policy)
            except Exception:  # a policy of other rules: the report goes on without it
                log.warning("report: a tenant's policy could not be read")
                continue
            out[tid] = policy.target_misfire_rate
    return out


def build_report(
    db: Engine, p: ReportParams, antipatterns: dict[str, list[dict[str, Any]]] | None = None
) -> dict[str, Any]:
    samples, stats, snaps, truncated = load(db, p)
    findings = antipatterns or {}
    summary = section(samples, stats, p)
    summary["antipatterns"] = [f | {"tenant": t} for t, fs in findings.items() for f in fs]
    tenants: dict[str, Any] = {}
    ids: list[str] = []
    if p.tenant is None:
        ids = _ranked({s.tenant_id for s in samples} | {r.tenant_id for r in stats} | set(findings),
                      samples, stats)  # fmt: skip
        shown = ids[:MAX_TENANT_SECTIONS]
        targets = _targets(db, shown)
        for tid in shown:
            # each tenant's section against its own target_misfire_rate (session 44: the
            # query's target, 1% by default, whatever the tenant had set)
            own = replace(p, target=targets.get(tid, p.target))
            part = section(
                [s for s in samples if s.tenant_id == tid],
                [r for r in stats if r.tenant_id == tid],
                own,
            )
            part["target_misfire_rate"] = own.target
            part["antipatterns"] = findings.get(tid, [])
            tenants[tid] = part
    return {
        "object": "misfire_report",
        "generated_at": p.now.isoformat(),
        "scope": {"tenant": p.tenant, "since": p.since.isoformat(), "hours": p.hours},
        "truncated": truncated,
        # per-tenant sections: the first MAX_TENANT_SECTIONS by misfires, labels, requests
        "tenants_shown": len(tenants),
        "tenants_total": len(ids),
        "params": {
            "target_misfire_rate": p.target,
            "criterion": p.criterion,
            "price_per_million_prompt_tokens": p.price_prompt,
            "price_per_million_completion_tokens": p.price_completion,
            "score_bucket_edges": list(p.bucket_edges),
            "model": None if p.model is None else p.model.__dict__,
        },
        "definitions": DEFINITIONS,
        "summary": summary,
        "tenants": tenants,
        "engine": engine_section(snaps),
    }


DEFINITIONS = {
    "semantic_hit_rate": "semantic-hit requests / all recorded requests",
    "eligible_hit_rate": "semantic hits / requests where a semantic lookup ran",
    "hit_scores": "similarity scores of the semantic hits the embedder in force scored "
    "(another embedder's, or recorded before migration 0011, are on another or an unknown "
    "scale: they count in the hit rates, hit_scores_other_embedders says how many)",
    "misfire_rate": "labelled misfires / labelled samples (unweighted), 95% Wilson interval",
    "misfire_rate_weighted": "sum of w over labelled misfires / sum of w over labelled samples, "
    "w = 1 / the sampling probability (near-threshold hits are sampled 3x); 95% Wilson "
    "interval at the effective size, the smaller of Kish's (sum w)^2 / sum w^2 and "
    "p(1-p) / Var with Var = sum w^2 (m-p)^2 / (sum w)^2; none when a sample lacks it; "
    "the estimate of the share of served hits, which the page and the text lead with",
    "recommended_threshold": "lowest labelled score t whose samples with score >= t have "
    "criterion (Wilson upper bound or point rate) <= target, weighted as "
    "misfire_rate_weighted when every labelled sample has its probability; setting: the "
    "threshold knob "
    "value that applies t (t itself, or under CACHEGATE_EMBEDDER=auto or e5, whose knobs "
    "are MiniLM cosines, 1 - (1 - t) / 0.3125); from the samples the embedder in force "
    "scored only (scores of another embedder, or taken before migration 0010, are on "
    "another or an unknown "
    "scale: they count in the misfire rate, not in the score sections)",
    "prefix_token_hit_rate": "sum(cached_tokens) / sum(prompt_tokens) over engine-served requests",
    "prefix_request_hit_rate": "engine-served requests with cached_tokens > 0 / engine-served",
    "ttft_cache_on": "semantic hits and requests that reused prefix tokens",
    "ttft_cache_off": "requests with label miss or bypass that reused nothing (full prefill)",
    "prefill_flops_saved": "sum of 2*N_params*c + 2*layers*heads*head_dim*c*(c+1) over reused "
    "token counts c (prefix cached tokens; whole prompt of semantic hits)",
    "decode_flops_saved": "2*N_params*completion tokens of semantic hits",
    "cost_saved_usd": "reused prompt tokens * $/1M prompt + semantic-hit completion tokens "
    "* $/1M completion",
    "evictions": "increase of the block pool's eviction counter over the window",
}
