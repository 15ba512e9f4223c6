"""Request statistics and engine snapshots written by a live gateway (tiny Llama,
semantic layer off), the prompt buffer that feeds the anti-pattern finder,
and the stats recorder's behaviour when the database is down.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from gateway.admin.service import TenantAdmin
from gateway.app import Components
from gateway.models import EngineSnapshot, RequestStat
from gateway.policy import TenantPolicy
from gateway.reports.recorder import PromptBuffer, RequestRecord, StatsRecorder, prompt_text
from gateway.tenants import TenantStore
from migrations.runner import upgrade_database
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from tests.gateway.conftest import (
    Gateway,
    gateway_settings,
    metric,
    running_gateway,
    wait_until,
)
from tests.gateway.report_support import report
from tests.gateway.scripted_report import (
    ADMIN_TOKEN,
)

# ----------------------------------------------------------------- a live gateway's statistics

PREFIX = " ".join(f"t{3 + i % 120}" for i in range(40))  # tiny-Llama words: 40 tokens


@pytest.fixture(scope="module")
def live(tiny_llama: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("live-stats"),
        semantic_enabled=False,
        admin_token=ADMIN_TOKEN,
        stats_flush_seconds=0.1,
        engine_snapshot_seconds=0.2,
    )
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=128), loaded=tiny_llama)
    with running_gateway(settings, Components(engine=engine)) as gateway:
        yield gateway


def stat_rows(gw: Gateway, tenant: str) -> list[RequestStat]:
    with Session(gw.app.state.db) as s:
        return list(
            s.scalars(
                select(RequestStat).where(RequestStat.tenant_id == tenant).order_by(RequestStat.id)
            )
        )


def snapshot_count(gw: Gateway) -> int:
    with Session(gw.app.state.db) as s:
        return len(list(s.scalars(select(EngineSnapshot.id))))


def test_live_requests_are_recorded_and_engine_snapshots_taken(live: Gateway) -> None:
    tenant, key = live.tenant("live")
    body = {"model": live.model, "prompt": PREFIX + " t99", "max_tokens": 4, "temperature": 0}
    with live.http(key) as http:
        first = http.post("/v1/completions", json=body)
        second = http.post("/v1/completions", json=body | {"stream": True})
        third = http.post("/v1/completions", json=body, headers={"Cache-Control": "no-cache"})
    assert first.status_code == second.status_code == third.status_code == 200
    assert wait_until(lambda: len(stat_rows(live, tenant)) == 3, timeout=10)
    rows = stat_rows(live, tenant)
    assert [r.cache for r in rows] == ["miss", "prefix-hit", "prefix-hit"]
    assert [r.stream for r in rows] == [False, True, False]
    assert rows[0].semantic == "skipped:disabled" and rows[2].semantic == "skipped:disabled"
    assert rows[0].prompt_tokens == first.json()["usage"]["prompt_tokens"] == 41
    assert rows[0].cached_tokens == 0 and rows[1].cached_tokens == 40
    assert all(r.ttft_ms is not None and 0 < r.ttft_ms <= r.latency_ms for r in rows)
    assert all(r.completion_tokens == 4 for r in rows)

    engine = live.state.upstream.engine
    assert engine is not None
    before = snapshot_count(live)
    assert wait_until(lambda: snapshot_count(live) >= before + 2, timeout=10)
    with Session(live.app.state.db) as s:
        snap = s.scalars(select(EngineSnapshot).order_by(EngineSnapshot.id.desc())).first()
    assert snap is not None
    assert snap.blocks_total == engine.pool.num_blocks == 128
    assert snap.bytes_per_block == engine.kv_cache.bytes_per_block
    assert snap.blocks_cached >= 10 and snap.hit_blocks >= 10

    r = report(live, tenant=tenant)
    assert r["summary"]["traffic"]["requests"] == 3
    assert r["summary"]["prefix"]["token_hit_rate"] == pytest.approx(80 / 123)
    assert r["engine"]["snapshots"] >= 2


def test_live_prompts_feed_the_antipattern_finder(live: Gateway) -> None:
    tenant, key = live.tenant("ap")
    with live.http(key) as http:
        for i in range(6):  # a different token at the very start, then 40 shared tokens
            body = {
                "model": live.model,
                "prompt": f"t{100 + i} {PREFIX} t{10 + i}",
                "max_tokens": 1,
            }
            assert http.post("/v1/completions", json=body).status_code == 200
    findings = report(live, tenant=tenant)["summary"]["antipatterns"]
    assert [f["kind"] for f in findings] == ["volatile_prefix"]
    f = findings[0]
    assert f["tenant"] == tenant and f["tokenizer"] == "engine"
    assert f["pairs"] == f["pairs_checked"] == 5
    assert f["first_diff_token"] == 0 and f["reused_tokens_now"] == 0
    assert f["reusable_tokens_if_fixed"] == 40  # 40 shared tokens = 10 blocks of 4
    assert f["gain_tokens_per_request"] == 40
    # the clean tenant from the other test has no finding
    other = report(live)["tenants"]
    assert all(t == tenant or not part["antipatterns"] for t, part in other.items())


def test_stats_recorder_drops_rows_when_the_database_is_down(tmp_path: Path) -> None:
    db = create_engine(f"sqlite:///{tmp_path / 'missing-dir' / 'x.db'}")
    registry = CollectorRegistry()
    recorder = StatsRecorder(db, registry, flush_seconds=0.05)

    async def scenario() -> int:
        recorder.start()
        for _ in range(3):
            recorder.record(
                RequestRecord("t", "miss", "miss:empty", None, 10, 0, 1), {"prompt": "x"}
            )
        await asyncio.sleep(0.3)
        written = await recorder.flush()
        await recorder.stop()
        return written

    started = time.monotonic()
    assert asyncio.run(scenario()) == 0
    assert time.monotonic() - started < 5
    dropped = metric(
        generate_latest(registry).decode(), "cachegate_stats_dropped_total", reason="database"
    )
    assert dropped == 3
    assert recorder.prompts.recent("t") == ["x", "x", "x"]  # kept in memory all the same
    recorder.prompts.forget("t")
    assert recorder.prompts.recent("t") == [] and recorder.prompts.tenants() == []


def test_a_row_the_database_refuses_is_counted_and_the_writer_goes_on(tmp_path: Path) -> None:
    # A count past 64 bits (no INTEGER holds it): SQLite raises OverflowError, no
    # SQLAlchemyError, and the batch it was in was lost uncounted.
    url = f"sqlite:///{tmp_path / 'x.db'}"
    upgrade_database(url)
    db = create_engine(url)
    registry = CollectorRegistry()
    recorder = StatsRecorder(db, registry, flush_seconds=60)

    async def scenario() -> tuple[int, int]:
        recorder.record(RequestRecord("t", "miss", "miss:empty", None, 2**63, 0, 1), {})
        refused = await recorder.flush()
        recorder.record(RequestRecord("t", "miss", "miss:empty", None, 10, 0, 1), {})
        return refused, await recorder.flush()  # control: the next row is written

    assert asyncio.run(scenario()) == (0, 1)
    text = generate_latest(registry).decode()
    assert metric(text, "cachegate_stats_dropped_total", reason="invalid") == 1
    db.dispose()


def test_prompt_buffer_is_bounded_per_tenant_and_in_tenants() -> None:
    buffer = PromptBuffer(per_tenant=3, max_tenants=2)
    for i in range(5):
        buffer.add("a", f"a{i}")
    buffer.add("b", "b0")
    buffer.add("a", "a5")  # a is now the most recently active tenant
    buffer.add("c", "c0")  # evicts b, the least recently active
    assert buffer.recent("a") == ["a3", "a4", "a5"]
    assert buffer.tenants() == ["a", "c"] and buffer.recent("b") == []
    chat = {
        "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": "A"},
            {"role": "user", "content": "Q2"},
        ]
    }
    assert prompt_text(chat) == "S\nQ1"
    assert prompt_text({"prompt": "P"}) == "P"
    assert prompt_text({"prompt": [1, 2]}) is None and prompt_text({"messages": []}) is None


def test_prompts_of_a_tenant_deleted_elsewhere_are_forgotten(tmp_path: Path) -> None:
    # The change feed names the tenants that changed on any replica; only those that no
    # longer exist lose their prompts (a policy change keeps them).
    url = f"sqlite:///{tmp_path / 'tenants.db'}"
    upgrade_database(url)
    tenants = TenantStore(create_engine(url))
    admin = TenantAdmin(tenants, None, None)
    for tid in ("gone", "kept", "idle"):
        admin.add_tenant("test", tid, None, TenantPolicy())
    buffer = PromptBuffer()
    for tid in ("gone", "kept", "idle"):
        buffer.add(tid, f"{tid} prompt")
    admin.delete("test", "gone")
    buffer.forget_deleted({"gone", "kept"}, tenants.namespace_id)
    assert buffer.tenants() == ["kept", "idle"]  # positive control: existing ones stay
    admin.delete("test", "idle")
    buffer.forget_deleted(set(), tenants.namespace_id)  # a rebuild names no tenant
    assert buffer.tenants() == ["kept"] and buffer.recent("kept") == ["kept prompt"]


def test_rows_and_prompts_of_a_deleted_tenant_never_count_for_one_recreated_under_its_id(
    tmp_path: Path,
) -> None:
    """Rows wait in the recorder's buffer for up to ``flush_seconds``: those of a tenant
    deleted meanwhile (and created again under its id) are dropped at write time, while
    rows of the tenant as it now is are written (the positive control)."""
    url = f"sqlite:///{tmp_path / 'tenants.db'}"
    upgrade_database(url)
    db = create_engine(url)
    tenants = TenantStore(db)
    admin = TenantAdmin(tenants, None, None)
    for tid in ("acme", "other"):
        admin.add_tenant("test", tid, None, TenantPolicy())
    old_acme, other = tenants.namespace_id("acme"), tenants.namespace_id("other")
    registry = CollectorRegistry()
    recorder = StatsRecorder(db, registry)

    def row(tenant: str, minted: str | None) -> RequestRecord:
        return RequestRecord(tenant, "miss", "miss:empty", None, 4, 0, 1, namespace_id=minted)

    for _ in range(3):
        recorder.record(row("acme", old_acme), {"prompt": "old acme prompt"})
        recorder.record(row("other", other), {"prompt": "other prompt"})
    admin.delete("test", "acme")
    admin.add_tenant("test", "acme", None, TenantPolicy())
    new_acme = tenants.namespace_id("acme")
    assert new_acme and new_acme != old_acme
    recorder.record(row("acme", new_acme))
    recorder.record(row("legacy", None))  # built outside a request: not checked
    assert asyncio.run(recorder.flush()) == 5
    with Session(db) as s:
        counts = {t: 0 for t in ("acme", "other", "legacy")}
        for tenant in s.scalars(select(RequestStat.tenant_id)):
            counts[tenant] += 1
    assert counts == {"acme": 1, "other": 3, "legacy": 1}
    text = generate_latest(registry).decode()
    assert metric(text, "cachegate_stats_dropped_total", reason="tenant_deleted") == 3

    # The prompt buffer: the new tenant's first prompt starts a ring of its own ...
    buffer = recorder.prompts
    assert buffer.recent("acme") == ["old acme prompt"] * 3  # nothing new came yet
    buffer.add("acme", "new acme prompt", new_acme)
    assert buffer.recent("acme") == ["new acme prompt"]
    # ... and another replica, whose ring still holds the old tenant's prompts when the
    # change feed names the id, drops them although a tenant of that id exists again.
    elsewhere = PromptBuffer()
    elsewhere.add("acme", "old acme prompt", old_acme)
    elsewhere.add("other", "other prompt", other)
    elsewhere.forget_deleted({"acme", "other"}, tenants.namespace_id)
    assert elsewhere.tenants() == ["other"]  # positive control: unchanged tenants keep
