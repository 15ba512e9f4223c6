"""Migration 0011 adds ``request_stats.embedder_id``: rows written before it keep NULL
(scale unknown), and the downgrade drops the column and keeps the rows (SQLite
recreates the table to drop a column, so the rows' survival is the point)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text

from migrations.runner import alembic_config, upgrade_database

AT = datetime(2026, 1, 1, tzinfo=UTC)


def columns(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return {c["name"] for c in inspect(engine).get_columns("request_stats")}
    finally:
        engine.dispose()


def rows(url: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            found = conn.execute(text("SELECT * FROM request_stats ORDER BY id")).mappings()
            return [(r["tenant_id"], r["score"], r.get("embedder_id", "gone")) for r in found]
    finally:
        engine.dispose()


def insert_row(url: str, tenant: str, embedder_id: str | None = None) -> None:
    """A served hit as the code of the schema in place writes it (raw SQL: the model
    has the newest columns)."""
    values: dict[str, Any] = {"at": AT, "tenant_id": tenant, "embedder_id": embedder_id}
    names = "at, tenant_id, cache, semantic, score, prompt_tokens, cached_tokens, "
    names += "completion_tokens, latency_ms, stream"
    params = ":at, :tenant_id, 'semantic-hit', 'hit', 0.9, 10, 10, 2, 1.0, false"
    if embedder_id is not None:
        names, params = names + ", embedder_id", params + ", :embedder_id"
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"INSERT INTO request_stats ({names}) VALUES ({params})"), values)
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_rows_keep_null_up_and_survive_down(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = str(request.getfixturevalue("pg_bare_url"))
    upgrade_database(url, "0010")
    assert "embedder_id" not in columns(url)
    insert_row(url, "before")  # written by the 0010-era code: no embedder

    upgrade_database(url, "0011")
    assert "embedder_id" in columns(url)
    insert_row(url, "after", "auto:x")
    assert rows(url) == [("before", 0.9, None), ("after", 0.9, "auto:x")]

    command.downgrade(alembic_config(url), "0010")
    assert "embedder_id" not in columns(url)
    assert rows(url) == [("before", 0.9, "gone"), ("after", 0.9, "gone")]
