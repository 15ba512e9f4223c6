"""A scripted set of labelled samples, request statistics and engine snapshots,
written straight into the gateway's tables, and a gateway to report on them
(tiny Llama engine, no semantic layer, no automatic engine snapshots)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, select

from gateway.app import Components
from gateway.models import EngineSnapshot, MisfireSample, RequestStat, Tenant
from gateway.tenants import utc_now
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway

ADMIN_TOKEN = "scripted-admin-token"
PRICE_PROMPT = 2.0
PRICE_COMPLETION = 8.0

# (score, label, shadow verdict) — alpha: 10 labelled (3 misfires) + 2 pending.
ALPHA_SAMPLES: list[tuple[float, str | None, str | None]] = [
    (0.86, "misfire", "disagree"),
    (0.87, "misfire", "agree"),
    (0.88, "correct", "agree"),
    (0.89, "misfire", "disagree"),
    (0.90, "correct", None),
    (0.91, "correct", None),
    (0.93, "correct", None),
    (0.95, "correct", None),
    (0.97, "correct", None),
    (0.99, "correct", "agree"),
    (0.92, None, None),
    (0.96, None, "agree"),
]
BETA_SAMPLES: list[tuple[float, str | None, str | None]] = [
    (0.95, "misfire", None),
    (0.99, "correct", None),
]

# (cache label, x-cachegate-semantic, score, prompt, cached, completion, ttft ms)
ALPHA_STATS: list[tuple[str, str, float | None, int, int, int, float]] = [
    ("semantic-hit", "hit", 0.90, 100, 100, 20, 5.0),
    ("semantic-hit", "hit", 0.95, 100, 100, 20, 6.0),
    ("semantic-hit", "hit", 0.97, 100, 100, 20, 7.0),
    ("semantic-hit", "hit", 0.99, 100, 100, 20, 8.0),
    ("prefix-hit", "miss:below_threshold", 0.5, 200, 160, 30, 50.0),
    ("prefix-hit", "miss:below_threshold", 0.6, 200, 160, 30, 60.0),
    ("prefix-hit", "miss:below_threshold", 0.7, 200, 160, 30, 70.0),
    ("miss", "miss:empty", None, 200, 0, 30, 100.0),
    ("miss", "miss:empty", None, 200, 0, 30, 300.0),
    ("bypass", "skipped:no-cache", None, 50, 0, 10, 200.0),
]
BETA_STATS: list[tuple[str, str, float | None, int, int, int, float]] = [
    ("semantic-hit", "hit", 0.96, 80, 80, 10, 4.0),
    ("miss", "miss:empty", None, 120, 0, 10, 150.0),
]

# (blocks used, blocks cached, evictions, query blocks, hit blocks); the third is after a restart.
SNAPSHOTS = [(10, 50, 0, 0, 0), (12, 60, 5, 10, 5), (4, 20, 2, 4, 2), (20, 80, 7, 14, 9)]
BYTES_PER_BLOCK = 1024
BLOCKS_TOTAL = 100


def insert_script(db: Engine, now: datetime | None = None) -> None:
    now = now or utc_now()
    start = now - timedelta(hours=1)
    with db.begin() as conn:
        # the tenants exist (a report names only known ones: a 404 since session 45)
        known = {t for (t,) in conn.execute(select(Tenant.id))}
        missing = [t for t in ("alpha", "beta") if t not in known]
        if missing:
            conn.execute(
                insert(Tenant),
                [{"id": t, "name": t, "created_at": now, "updated_at": now} for t in missing],
            )
        rows: list[dict[str, Any]] = []
        for tenant, samples in (("alpha", ALPHA_SAMPLES), ("beta", BETA_SAMPLES)):
            for i, (sample_score, label, shadow) in enumerate(samples):
                rows.append(
                    {
                        "tenant_id": tenant,
                        "created_at": start + timedelta(minutes=i),
                        "request_id": f"chatcmpl-{tenant}-{i}",
                        "entry_id": i + 1,
                        "partition_key": "p" * 64,
                        "question": f"question {i}",
                        "matched_question": f"matched {i}",
                        "served_answer": f"answer {i}",
                        "score": sample_score,
                        "threshold": 0.85,
                        "entity_comparison": {"questions": {"matches": True}},
                        "label": label,
                        "labeled_by": "admin" if label else None,
                        "labeled_at": now if label else None,
                        "shadow_verdict": shadow,
                        "shadow_similarity": 0.9 if shadow == "agree" else 0.2 if shadow else None,
                    }
                )
        conn.execute(insert(MisfireSample), rows)
        stats = []
        for tenant, script in (("alpha", ALPHA_STATS), ("beta", BETA_STATS)):
            for i, (cache, sem, score, prompt, cached, completion, ttft) in enumerate(script):
                stats.append(
                    {
                        "at": start + timedelta(minutes=2 * i),
                        "tenant_id": tenant,
                        "cache": cache,
                        "semantic": sem,
                        "score": score,
                        "prompt_tokens": prompt,
                        "cached_tokens": cached,
                        "completion_tokens": completion,
                        "ttft_ms": ttft,
                        "latency_ms": ttft + 10,
                        "stream": False,
                    }
                )
        conn.execute(insert(RequestStat), stats)
        conn.execute(
            insert(EngineSnapshot),
            [
                {
                    "at": start + timedelta(minutes=10 * i),
                    "blocks_total": BLOCKS_TOTAL,
                    "blocks_used": used,
                    "blocks_cached": cached,
                    "bytes_per_block": BYTES_PER_BLOCK,
                    "evictions": ev,
                    "query_blocks": q,
                    "hit_blocks": h,
                }
                for i, (used, cached, ev, q, h) in enumerate(SNAPSHOTS)
            ],
        )


@contextmanager
def scripted_gateway(tiny: LoadedModel, data_dir: Path, **extra: Any) -> Iterator[Gateway]:
    """A gateway over a fresh database holding the script (and nothing else)."""
    settings = gateway_settings(
        data_dir,
        semantic_enabled=False,
        admin_token=ADMIN_TOKEN,
        engine_snapshot_seconds=0,
        stats_flush_seconds=0.1,
        price_per_million_prompt_tokens=PRICE_PROMPT,
        price_per_million_completion_tokens=PRICE_COMPLETION,
        **extra,
    )
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=64), loaded=tiny)
    with running_gateway(settings, Components(engine=engine)) as gw:
        insert_script(gw.app.state.db)
        yield gw
