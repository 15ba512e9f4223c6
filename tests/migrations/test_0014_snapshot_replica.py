"""Migration 0014 adds ``engine_snapshots.replica`` (nullable: rows of before read as
one series of their own); the downgrade drops it and keeps the rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text

from migrations.runner import alembic_config, upgrade_database


def columns(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return {c["name"] for c in inspect(engine).get_columns("engine_snapshots")}
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_replica_up_and_down(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'replica.db'}"
    else:
        url = str(request.getfixturevalue("pg_bare_url"))
    upgrade_database(url, "0013")
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO engine_snapshots (at, blocks_total, blocks_used, blocks_cached, "
                "bytes_per_block, evictions, query_blocks, hit_blocks) "
                "VALUES ('2026-12-06 12:00:00', 1, 0, 0, 1, 0, 0, 0)"
            )
        )
    engine.dispose()
    assert "replica" not in columns(url)
    upgrade_database(url, "0014")
    assert "replica" in columns(url)
    command.downgrade(alembic_config(url), "0013")
    assert "replica" not in columns(url)
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM engine_snapshots")).scalar_one() == 1
    engine.dispose()
