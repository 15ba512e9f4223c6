"""The report's histogram of served hits' scores (``hit_scores``) draws only the hits the
embedder in force scored: each request statistics row records the embedder of its
lookup (migration 0011), rows of another embedder or from before 0011 (unknown scale)
are counted in ``hit_scores_other_embedders`` and said in the figure's caption, and
every hit still counts in the hit rates. With no embedder known, every hit is drawn.

Rows are written by the real stats writer into real SQLite and PostgreSQL, and by a
live gateway (scripted upstream, the real MiniLM embedder) for the request path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, select
from sqlalchemy.orm import Session

from gateway.app import Components
from gateway.models import RequestStat
from gateway.reports.build import ReportParams, build_report
from gateway.reports.html import render
from gateway.reports.recorder import RequestRecord, StatsRecorder
from migrations.runner import upgrade_database
from semantic import Embedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.conftest import (
    PG_SERVER_URL,
    Gateway,
    chat_body,
    gateway_settings,
    running_gateway,
    wait_until,
)
from tests.gateway.report_support import REPORT, report
from tests.gateway.scripted_report import ADMIN_TOKEN
from tests.gateway.scripted_upstream import scripted_upstream

IN_FORCE = "auto:s0.3125:f1:minilm+e5"
OTHER = "minilm:384:0123456789abcdef"


def hit(tenant: str, score: float, embedder_id: str | None) -> RequestRecord:
    return RequestRecord(tenant, "semantic-hit", "hit", score, 10, 10, 2, embedder_id=embedder_id)


#: Tenant a: two hits under the embedder in force, one under MiniLM, one from before
#: migration 0011 (no embedder); a miss with a score and a bypass. Tenant b: one
#: MiniLM hit.
RECORDS = [
    hit("a", 0.95, IN_FORCE),
    hit("a", 0.97, IN_FORCE),
    hit("a", 0.86, OTHER),
    hit("a", 0.88, None),
    RequestRecord("a", "miss", "miss:below_threshold", 0.5, 20, 0, 2, embedder_id=IN_FORCE),
    RequestRecord("a", "bypass", "skipped:no-cache", None, 20, 0, 2),
    hit("b", 0.99, OTHER),
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A migrated database holding ``RECORDS``, written by the stats writer."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'stats.db'}"
    else:
        schema: str = request.getfixturevalue("pg_schema")
        url = f"{PG_SERVER_URL}?options=-csearch_path%3D{schema}"
    upgrade_database(url)
    engine = create_engine(url)
    recorder = StatsRecorder(engine)
    for record in RECORDS:
        recorder.record(record)
    assert asyncio.run(recorder.flush()) == len(RECORDS)
    try:
        yield engine
    finally:
        engine.dispose()


def test_the_writer_stores_each_rows_embedder(db: Engine) -> None:
    with Session(db) as s:
        stored = list(s.execute(select(RequestStat.score, RequestStat.embedder_id)))
    assert sorted(stored, key=lambda r: r[0] or 0) == sorted(
        [(r.score, r.embedder_id) for r in RECORDS], key=lambda r: r[0] or 0
    )


def test_only_the_embedder_in_force_is_drawn_and_the_others_counted(db: Engine) -> None:
    report_ = build_report(db, ReportParams(embedder_id=IN_FORCE))
    t = report_["summary"]["traffic"]
    assert sorted(t["hit_scores"]) == pytest.approx([0.95, 0.97])
    assert t["hit_scores_other_embedders"] == 3  # MiniLM's two and the one from before 0011
    # the hit counts and rates count every hit, whatever scored it
    assert t["semantic_hits"] == 5 and t["requests"] == 7
    assert t["semantic_hit_rate"] == pytest.approx(5 / 7)
    a, b = report_["tenants"]["a"]["traffic"], report_["tenants"]["b"]["traffic"]
    assert sorted(a["hit_scores"]) == pytest.approx([0.95, 0.97])
    assert a["hit_scores_other_embedders"] == 2 and a["semantic_hits"] == 4
    assert b["hit_scores"] == [] and b["hit_scores_other_embedders"] == 1
    assert b["semantic_hit_rate"] == 1.0

    # under MiniLM, the mirror: its own hits drawn, the routed ones and the unknown counted
    minilm = build_report(db, ReportParams(embedder_id=OTHER))["summary"]["traffic"]
    assert sorted(minilm["hit_scores"]) == pytest.approx([0.86, 0.99])
    assert minilm["hit_scores_other_embedders"] == 3

    # control: no embedder known (semantic layer off), every hit drawn as before 0011
    every = build_report(db, ReportParams())["summary"]["traffic"]
    assert sorted(every["hit_scores"]) == pytest.approx([0.86, 0.88, 0.95, 0.97, 0.99])
    assert every["hit_scores_other_embedders"] == 0


def test_the_caption_says_how_many_hits_were_not_drawn(db: Engine) -> None:
    figures = {"score_histogram": b"\x89PNG"}
    page = render(build_report(db, ReportParams(embedder_id=IN_FORCE)), figures)
    assert "3 hits under other embedders not drawn</figcaption>" in page
    # nothing left out, nothing said
    page = render(build_report(db, ReportParams()), figures)
    assert "Score histogram of hits vs misfires</figcaption>" in page
    assert "not drawn" not in page


def test_a_live_gateway_records_the_embedder_of_each_lookup(
    embedder: Embedder, tmp_path: Path
) -> None:
    with scripted_upstream("vllm") as up:
        settings = gateway_settings(
            tmp_path, upstream_url=up.url, admin_token=ADMIN_TOKEN, stats_flush_seconds=0.1
        )
        with running_gateway(settings, Components(embedder=embedder)) as gw:
            tenant, key = gw.tenant("scores")
            asked = [
                ("How do I reset my password?", {}),  # a miss: the partition is empty
                ("How can I reset my password?", {}),  # a hit
                ("What is the boiling point of water?", {}),  # a miss with a score
                ("How do I reset my password?", {"Cache-Control": "no-cache"}),  # no lookup
            ]
            with gw.http(key) as http:
                sent = [
                    http.post("/v1/chat/completions", json=chat_body(rec.MODEL, q), headers=h)
                    for q, h in asked
                ]
            assert [r.headers["x-cachegate-semantic"].split(":")[0] for r in sent] == [
                "miss",
                "hit",
                "miss",
                "skipped",
            ]
            assert wait_until(lambda: len(rows(gw, tenant)) == 4)
            found = rows(gw, tenant)
            in_force = gw.cache.embedder_id
            assert [r.embedder_id for r in found] == [in_force, in_force, in_force, None]
            assert found[1].cache == "semantic-hit" and found[2].score is not None

            served = float(sent[1].headers["x-cachegate-similarity"])
            t = report(gw, tenant=tenant)["summary"]["traffic"]
            assert t["hit_scores"] == [pytest.approx(served, abs=1e-4)]
            assert t["hit_scores_other_embedders"] == 0
            # a hit another embedder served before a switch: counted, not drawn
            recorder = StatsRecorder(gw.app.state.db)
            recorder.record(hit(tenant, 0.5, OTHER))
            assert asyncio.run(recorder.flush()) == 1
            t = report(gw, tenant=tenant)["summary"]["traffic"]
            assert t["hit_scores"] == [pytest.approx(served, abs=1e-4)]
            assert t["hit_scores_other_embedders"] == 1 and t["semantic_hits"] == 2
            with gw.http(ADMIN_TOKEN) as http:
                page = http.get(REPORT, params={"format": "html", "tenant": tenant}).text
            assert "1 hits under other embedders not drawn" in page


def rows(gw: Gateway, tenant: str) -> list[RequestStat]:
    with Session(gw.app.state.db) as s:
        query = select(RequestStat).where(RequestStat.tenant_id == tenant)
        return list(s.scalars(query.order_by(RequestStat.id)))
