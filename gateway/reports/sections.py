"""The sections of the misfire report, computed from plain rows (definitions in
:mod:`gateway.reports.build`): traffic and prefix hit rates, TTFT with cache on/off,
savings, the timeline, misfire statistics, and the engine's memory and evictions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from gateway.models import EngineSnapshot
from gateway.reports.stats import (
    DEFAULT_EDGES,
    Criterion,
    Labelled,
    buckets,
    effective_size,
    percentiles,
    proportion,
    rate,
    recommend,
    thin,
    threshold_curve,
    weighted_wilson,
)
from gateway.tenants import utc_now
from semantic.embedder_routed import as_minilm_cosine, on_routed_scale

ENGINE_LABELS = ("prefix-hit", "miss", "bypass")
MAX_TENANT_SECTIONS = 50


@dataclass(frozen=True)
class ModelShape:
    """What the FLOPs estimate needs from the served model."""

    name: str
    params: int
    layers: int
    heads: int
    head_dim: int

    def prefill_flops(self, tokens: int) -> float:
        return 2.0 * self.params * tokens + 2.0 * self.layers * self.heads * self.head_dim * (
            tokens * (tokens + 1)
        )


@dataclass(frozen=True)
class ReportParams:
    tenant: str | None = None
    hours: float = 168.0
    target: float = 0.01
    criterion: Criterion = "wilson_upper"
    price_prompt: float = 0.50  # $ per 1M prompt tokens
    price_completion: float = 1.50  # $ per 1M completion tokens
    edges: tuple[float, ...] = DEFAULT_EDGES
    max_rows: int = 200_000
    model: ModelShape | None = None
    now: datetime = field(default_factory=utc_now)
    # Scores on e5's scale where the knobs are MiniLM cosines (CACHEGATE_EMBEDDER=auto's
    # routed scale, or e5's own): the recommended threshold is also given as the value
    # to set, a MiniLM cosine (semantic/embedder_routed.py knobs_on_e5_scale).
    routed: bool = False
    # The embedder in force: the score sections read only the samples it scored, and the
    # hit score histogram only the hits it scored (another embedder's scores are on
    # another scale). None: every sample and every hit.
    embedder_id: str | None = None
    # The policy field that sets the threshold a lookup applies: ``threshold``, or with
    # the pair verifier on (the default) ``retrieval_threshold`` (the gateway then
    # ignores ``threshold``: Pipeline.threshold_in_force).
    knob: str = "threshold"

    @property
    def bucket_edges(self) -> tuple[float, ...]:
        """The score buckets' edges on the scale the scores are on. The default edges
        are MiniLM cosines (0.80 … 1.00); on the routed scale every score of a served
        hit is above 0.93, so they are put on it as a tenant's threshold is (0.80 →
        0.9375), and seven of ten buckets are no longer empty by construction."""
        if self.routed and self.edges == DEFAULT_EDGES:
            return tuple(round(on_routed_scale(e), 6) for e in self.edges)
        return self.edges

    @property
    def since(self) -> datetime:
        return self.now - timedelta(hours=self.hours)


@dataclass(frozen=True)
class Sample:
    tenant_id: str
    score: float
    label: str | None
    shadow: str | None
    probability: float | None = None  # the sampling probability it was drawn with
    embedder_id: str | None = None  # whose scale ``score`` is on (None: unknown)


@dataclass(frozen=True)
class Stat:
    at: datetime
    tenant_id: str
    cache: str
    semantic: str
    score: float | None
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    ttft_ms: float | None
    embedder_id: str | None = None  # whose scale ``score`` is on (None: no lookup, or unknown)


def misfire_section(samples: Sequence[Sample], p: ReportParams) -> dict[str, Any]:
    labelled = [Labelled(s.score, s.label == "misfire") for s in samples if s.label]
    misfires = sum(x.misfire for x in labelled)
    # The rate counts every label; scores are comparable only on one embedder's scale.
    same = [s for s in samples if p.embedder_id is None or s.embedder_id == p.embedder_id]
    scored = [Labelled(s.score, s.label == "misfire") for s in same if s.label]
    if scored and all(s.probability for s in same if s.label):  # weighted as the headline
        scored = [
            Labelled(s.score, s.label == "misfire", 1.0 / s.probability)
            for s in same
            if s.label and s.probability
        ]
    curve = threshold_curve(scored)
    shadow = [s for s in samples if s.shadow in ("agree", "disagree")]
    both = [s for s in shadow if s.label]
    matching = sum((s.shadow == "disagree") == (s.label == "misfire") for s in both)
    wrong = [s for s in both if s.label == "misfire"]
    return {
        "misfires": {
            "samples": len(samples),
            "pending": sum(1 for s in samples if not s.label),
            "labelled": len(labelled),
            "misfires": misfires,
            "correct": len(labelled) - misfires,
            **_without_counts(proportion(misfires, len(labelled))),
            "weighted": weighted_misfires([s for s in samples if s.label]),
        },
        "scores": {
            "embedder_id": p.embedder_id,
            "labelled": len(scored),
            "other_embedders": len(labelled) - len(scored),
        },
        "score_buckets": [_with_settings(b, p) for b in buckets(scored, p.bucket_edges)],
        "threshold_curve": thin(curve, 200),
        "recommended_threshold": with_setting(recommend(curve, p.target, p.criterion), p),
        "shadow": {
            "verified": len(shadow),
            "agree": sum(1 for s in shadow if s.shadow == "agree"),
            "disagree": sum(1 for s in shadow if s.shadow == "disagree"),
            "with_human_label": len(both),
            "agreement_with_humans": rate(matching, len(both)),
            # Whether an ``agree`` can be trusted on this traffic: how often the shadow
            # agreed with hits a reviewer judged wrong (docs/misfire_reports.md).
            "labelled_misfires": len(wrong),
            "agree_on_labelled_misfires": sum(1 for s in wrong if s.shadow == "agree"),
        },
        "labelled_scores": {
            "correct": [x.score for x in scored if not x.misfire][:5000],
            "misfire": [x.score for x in scored if x.misfire][:5000],
        },
    }


def _with_settings(bucket: dict[str, Any], p: ReportParams) -> dict[str, Any]:
    """On the routed scale, a bucket's edges also as the threshold values to set (MiniLM
    cosines, what the policy's knobs take); None elsewhere, where they are the same."""
    if not p.routed:
        return bucket | {"setting_low": None, "setting_high": None}
    low = None if bucket["low"] is None else round(as_minilm_cosine(bucket["low"]), 4)
    return bucket | {"setting_low": low, "setting_high": round(as_minilm_cosine(bucket["high"]), 4)}


def with_setting(rec: dict[str, Any], p: ReportParams) -> dict[str, Any]:
    """``rec`` with ``setting`` and ``knob``: the value of the tenant's policy field that
    applies it, and that field (``retrieval_threshold`` with the verifier on, else
    ``threshold``). The score itself under MiniLM; under ``auto`` and ``e5`` the scores
    are on e5's scale and the knob takes a MiniLM cosine, which the gateway maps."""
    t = rec["threshold"]
    setting = None if t is None else (round(as_minilm_cosine(t), 6) if p.routed else t)
    return rec | {"setting": setting, "knob": p.knob}


def weighted_misfires(labelled: Sequence[Sample]) -> dict[str, Any] | None:
    """The misfire rate with each labelled sample weighing 1 / its sampling probability
    (near-threshold hits are sampled 3x) and its Wilson interval at the effective
    sample size (stats.py); None without labels or when any lacks a recorded probability."""
    probabilities = [s.probability for s in labelled]
    if not probabilities or any(p is None for p in probabilities):
        return None
    weights = [1.0 / p for p in probabilities if p is not None]
    w, w2 = math.fsum(weights), math.fsum(x * x for x in weights)
    misfired = [x for x, s in zip(weights, labelled, strict=True) if s.label == "misfire"]
    wm, w2m = math.fsum(misfired), math.fsum(x * x for x in misfired)
    found = weighted_wilson(wm, w, w2, w2m)
    if found is None:
        return None
    return {
        "rate": found[0],
        "wilson_low": found[1],
        "wilson_high": found[2],
        "n_effective": effective_size(found[0], w, w2, w2m),
    }


def _without_counts(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k not in ("k", "n")}


def traffic_section(stats: Sequence[Stat], p: ReportParams) -> dict[str, Any]:
    by_label: dict[str, int] = {}
    for r in stats:
        by_label[r.cache] = by_label.get(r.cache, 0) + 1
    hits = by_label.get("semantic-hit", 0)
    looked_up = sum(1 for r in stats if r.semantic.startswith(("hit", "miss")))
    engine = [r for r in stats if r.cache in ENGINE_LABELS]
    prompt = sum(r.prompt_tokens for r in engine)
    cached = sum(r.cached_tokens for r in engine)
    reused = sum(1 for r in engine if r.cached_tokens > 0)
    on = [r.ttft_ms for r in stats if r.ttft_ms is not None and _reused(r)]
    off = [r.ttft_ms for r in stats if r.ttft_ms is not None and not _reused(r)]
    # Hit counts and rates count every hit; scores are comparable only on one embedder's
    # scale, so the histogram draws those of the embedder in force (rows from before
    # migration 0011 have no embedder: scale unknown, not drawn either).
    scored = [r for r in stats if r.cache == "semantic-hit" and r.score is not None]
    drawn = [r for r in scored if p.embedder_id is None or r.embedder_id == p.embedder_id]
    return {
        "traffic": {
            "requests": len(stats),
            "by_cache": dict(sorted(by_label.items())),
            "semantic_hits": hits,
            "semantic_hit_rate": rate(hits, len(stats)),
            "semantic_lookups": looked_up,
            "eligible_hit_rate": rate(hits, looked_up),
            "hit_scores": [r.score for r in drawn][:20000],
            "hit_scores_other_embedders": len(scored) - len(drawn),
        },
        "prefix": {
            "engine_requests": len(engine),
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "token_hit_rate": rate(cached, prompt),
            "requests_with_reuse": reused,
            "request_hit_rate": rate(reused, len(engine)),
        },
        "ttft_ms": {
            "cache_on": percentiles(on),
            "cache_off": percentiles(off),
            "by_cache": {
                label: percentiles(
                    [r.ttft_ms for r in stats if r.cache == label and r.ttft_ms is not None]
                )
                for label in sorted(by_label)
            },
        },
        "savings": savings(stats, p),
        "timeline": timeline(stats),
    }


def _reused(r: Stat) -> bool:
    return r.cache == "semantic-hit" or r.cached_tokens > 0


def cost_saved_usd(
    prompt_tokens: int, completion_tokens: int, price_prompt: float, price_completion: float
) -> float:
    """Reused prompt tokens at $/1M prompt plus semantic-hit completion tokens at $/1M
    completion: the report's formula, also counted per request into
    ``cachegate_cost_saved_usd_total`` (:mod:`gateway.saved_metrics`)."""
    return prompt_tokens / 1e6 * price_prompt + completion_tokens / 1e6 * price_completion


def savings(stats: Sequence[Stat], p: ReportParams) -> dict[str, Any]:
    prefix_tokens = sum(r.cached_tokens for r in stats if r.cache in ENGINE_LABELS)
    hits = [r for r in stats if r.cache == "semantic-hit"]
    semantic_prompt = sum(r.prompt_tokens for r in hits)
    semantic_completion = sum(r.completion_tokens for r in hits)
    prompt_saved = prefix_tokens + semantic_prompt
    out: dict[str, Any] = {
        "prompt_tokens_saved": prompt_saved,
        "prefix_tokens_reused": prefix_tokens,
        "semantic_prompt_tokens": semantic_prompt,
        "semantic_completion_tokens": semantic_completion,
        "cost_saved_usd": cost_saved_usd(
            prompt_saved, semantic_completion, p.price_prompt, p.price_completion
        ),
        "prefill_flops_saved": None,
        "decode_flops_saved": None,
    }
    m = p.model
    if m is not None:
        reused = [r.cached_tokens for r in stats if r.cache in ENGINE_LABELS and r.cached_tokens]
        reused += [r.prompt_tokens for r in hits if r.prompt_tokens]
        out["prefill_flops_saved"] = float(sum(m.prefill_flops(c) for c in reused))
        out["decode_flops_saved"] = 2.0 * m.params * semantic_completion
    return out


def timeline(stats: Sequence[Stat], points: int = 24) -> list[dict[str, Any]]:
    """Hit rates in ``points`` equal time buckets over the span of the data."""
    if not stats:
        return []
    start, end = stats[0].at, stats[-1].at
    width = max((end - start).total_seconds() / points, 1.0)
    groups: dict[int, list[Stat]] = {}
    for r in stats:
        i = min(int((r.at - start).total_seconds() // width), points - 1)
        groups.setdefault(i, []).append(r)
    out = []
    for i in sorted(groups):
        rows = groups[i]
        engine = [r for r in rows if r.cache in ENGINE_LABELS]
        prompt = sum(r.prompt_tokens for r in engine)
        out.append(
            {
                "start": (start + timedelta(seconds=i * width)).isoformat(),
                "requests": len(rows),
                "semantic_hit_rate": rate(sum(r.cache == "semantic-hit" for r in rows), len(rows)),
                "prefix_token_hit_rate": rate(sum(r.cached_tokens for r in engine), prompt),
                "prefix_request_hit_rate": rate(
                    sum(r.cached_tokens > 0 for r in engine), len(engine)
                ),
            }
        )
    return out


def engine_section(snaps: Sequence[EngineSnapshot]) -> dict[str, Any]:
    """Counters summed over the replicas (each its own series: interleaved, every drop
    read as a restart); memory from the replica that wrote last."""
    if not snaps:
        return {"snapshots": 0, "evictions": None, "memory": [], "block_hit_rate": None}
    series: dict[str | None, list[EngineSnapshot]] = {}
    for snap in snaps:  # in time order, each replica's too
        series.setdefault(getattr(snap, "replica", None), []).append(snap)
    evictions = 0
    queries = hits = 0
    for rows in series.values():
        for a, b in itertools.pairwise(rows):
            restarted = b.evictions < a.evictions or b.query_blocks < a.query_blocks
            evictions += b.evictions if restarted else b.evictions - a.evictions
            queries += b.query_blocks if restarted else b.query_blocks - a.query_blocks
            hits += b.hit_blocks if restarted else b.hit_blocks - a.hit_blocks
    span_min = (snaps[-1].at - snaps[0].at).total_seconds() / 60
    snaps = series[getattr(snaps[-1], "replica", None)]
    memory = [
        {
            "at": s.at.isoformat(),
            "cached_bytes": s.blocks_cached * s.bytes_per_block,
            "used_bytes": s.blocks_used * s.bytes_per_block,
            "total_bytes": s.blocks_total * s.bytes_per_block,
        }
        for s in snaps
    ]
    used = [s.blocks_used * s.bytes_per_block for s in snaps]
    half = len(used) // 2
    floor_change = min(used[half:]) - min(used[:half]) if half else None
    return {
        "snapshots": sum(len(rows) for rows in series.values()),
        "replicas": len(series),
        "evictions": evictions,
        "evictions_per_minute": evictions / span_min if span_min > 0 else None,
        "block_hit_rate": rate(hits, queries),
        "latest": memory[-1],
        "used_floor_change_bytes": floor_change,
        "memory": thin(memory, 500),
    }


def section(samples: Sequence[Sample], stats: Sequence[Stat], p: ReportParams) -> dict[str, Any]:
    return {**traffic_section(stats, p), **misfire_section(samples, p)}
