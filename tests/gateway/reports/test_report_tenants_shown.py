"""Which tenants get a section in the misfire report, and what their row says (a review,
session 41): the sections go to the tenants with the most misfires, then labels, then
requests (alphabetical, the five tenants with every misfire fell past the 50th and
vanished), the page and the text say how many were left out, and the page's
per-tenant recommendation is the value to set (under ``auto`` it showed the score on
e5's scale). Also: truncated rows are said in the text, and the newest engine snapshots
are the ones kept. Real SQLite, the report built as the admin API builds it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import create_engine, insert

from gateway.admin.service import TenantAdmin
from gateway.models import EngineSnapshot, MisfireSample, RequestStat
from gateway.policy import TenantPolicy
from gateway.reports.build import MAX_TENANT_SECTIONS, ReportParams, build_report
from gateway.reports.html import _to_set, render
from gateway.reports.text import format_summary
from gateway.tenants import TenantStore
from migrations.runner import upgrade_database

NOW = datetime.now(UTC)


def database(tmp_path: Path) -> object:
    url = f"sqlite:///{tmp_path / 'report.db'}"
    upgrade_database(url)
    return create_engine(url)


def sample(tenant: str, label: str) -> dict[str, object]:
    return {
        "tenant_id": tenant, "created_at": NOW - timedelta(minutes=5), "request_id": "r",
        "entry_id": 1, "partition_key": "p", "question": "q", "matched_question": "m",
        "served_answer": "a", "score": 0.93, "threshold": 0.89, "label": label,
    }  # fmt: skip


def test_the_tenants_with_misfires_get_their_sections(tmp_path: Path) -> None:
    db = database(tmp_path)
    total = MAX_TENANT_SECTIONS + 5
    with db.begin() as c:  # type: ignore[attr-defined]
        for i in range(total):  # the last five, alphabetically, hold every misfire
            label = "misfire" if i >= MAX_TENANT_SECTIONS else "correct"
            c.execute(insert(MisfireSample).values(**sample(f"t{i:02d}", label)))
    report = build_report(db, ReportParams(now=NOW))  # type: ignore[arg-type]
    shown = list(report["tenants"])
    assert len(shown) == MAX_TENANT_SECTIONS
    assert set(shown[:5]) == {f"t{i:02d}" for i in range(MAX_TENANT_SECTIONS, total)}
    assert "t00" in shown and f"t{MAX_TENANT_SECTIONS - 1:02d}" not in shown  # the control
    assert (report["tenants_shown"], report["tenants_total"]) == (MAX_TENANT_SECTIONS, total)
    note = f"{MAX_TENANT_SECTIONS} of {total} tenants shown"
    assert note in format_summary(report) and note in render(report, {})


def test_the_pages_recommendation_is_the_value_to_set() -> None:
    routed = {"threshold": 0.96, "setting": 0.872, "knob": "retrieval_threshold"}
    assert _to_set(routed) == "retrieval_threshold 0.8720"
    assert _to_set({"threshold": 0.93, "setting": 0.93, "knob": "threshold"}) == "threshold 0.9300"
    assert _to_set({"threshold": None, "setting": None}) == "–"


def test_truncation_is_said_and_the_newest_snapshots_kept(tmp_path: Path) -> None:
    db = database(tmp_path)
    with db.begin() as c:  # type: ignore[attr-defined]
        for h in range(10):
            c.execute(
                insert(EngineSnapshot).values(
                    at=NOW - timedelta(hours=h), blocks_total=100, blocks_used=10,
                    blocks_cached=5, bytes_per_block=1024, evictions=100 - h,
                    query_blocks=10, hit_blocks=5,
                )
            )  # fmt: skip
            c.execute(
                insert(RequestStat).values(
                    at=NOW - timedelta(hours=h), tenant_id="a", cache="miss", semantic="miss",
                    prompt_tokens=10, cached_tokens=0, completion_tokens=5, latency_ms=4.0,
                    stream=False,
                )
            )  # fmt: skip
    report = build_report(db, ReportParams(now=NOW, max_rows=5))  # type: ignore[arg-type]
    assert report["truncated"]
    assert "rows truncated" in format_summary(report)
    assert report["engine"]["snapshots"] == 5
    assert report["engine"]["evictions"] == 4  # the newest five: 96 → 100


def test_two_replicas_snapshots_are_two_series(tmp_path: Path) -> None:
    """Interleaved replicas' counters read as one series took every drop for a restart
    (evictions 5030 for a true 10; a review, session 41)."""
    db = database(tmp_path)
    with db.begin() as c:  # type: ignore[attr-defined]
        for i in range(6):
            for replica, base in (("a:1", 0), ("b:2", 5000)):
                c.execute(
                    insert(EngineSnapshot).values(
                        at=NOW - timedelta(minutes=60 - i * 10, seconds=base // 1000),
                        blocks_total=100, blocks_used=10, blocks_cached=5,
                        bytes_per_block=1024, evictions=base + i, query_blocks=base + 10 * i,
                        hit_blocks=base + 5 * i, replica=replica,
                    )
                )  # fmt: skip
    engine = build_report(db, ReportParams(now=NOW))["engine"]  # type: ignore[arg-type]
    assert engine["evictions"] == 10 and engine["replicas"] == 2  # 5 a replica
    assert engine["block_hit_rate"] == 0.5
    assert engine["snapshots"] == 12


def test_each_tenant_section_reads_against_its_own_target(tmp_path: Path) -> None:
    # A tenant that set target_misfire_rate 5% is judged against 5% in its section, one
    # without a policy against the query's 1% (before session 44 every section used the
    # query's: a 5% tenant's recommendation was never met, a review).
    db = database(tmp_path)
    admin = TenantAdmin(TenantStore(db), None, None)  # type: ignore[arg-type]
    admin.add_tenant("tests", "loose", None, TenantPolicy(target_misfire_rate=0.05))
    admin.add_tenant("tests", "plain", None)
    with db.begin() as conn:  # type: ignore[attr-defined]
        rows = [sample(t, "correct") for t in ("loose", "plain") for _ in range(60)]
        rows += [sample(t, "misfire") for t in ("loose", "plain") for _ in range(2)]
        conn.execute(insert(MisfireSample), rows)
    report = build_report(db, ReportParams(now=NOW, criterion="point"))  # type: ignore[arg-type]
    loose, plain = report["tenants"]["loose"], report["tenants"]["plain"]
    assert loose["target_misfire_rate"] == 0.05 and plain["target_misfire_rate"] == 0.01
    assert loose["recommended_threshold"]["target"] == 0.05
    # 2 misfires of 62 (3.2%): within the loose tenant's 5%, not within 1%
    assert loose["recommended_threshold"]["threshold"] is not None
    assert plain["recommended_threshold"]["threshold"] is None
