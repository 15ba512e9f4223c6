"""Migration 0015: ``semantic_partition_sizes`` counts the rows already there, and its
triggers keep each partition's count equal to a GROUP BY over ``semantic_entries``
through inserts, bulk deletes and a row moved to another partition, on both backends;
the downgrade drops the table and the triggers, and the entries stay writable."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Engine, create_engine, text

from migrations.runner import alembic_config, upgrade_database
from tests.migrations.test_migrations import tables


def insert(engine: Engine, tenant: str, partition: str, n: int, start: int = 0) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO semantic_entries (partition_key, tenant, question,"
                " normalized_question, question_digest, answer, embedding, embedder_id,"
                " created_at, updated_at, hit_count) VALUES (:p, :t, :q, :q, :d, '{}', :e,"
                " 'emb', '2026-12-06 12:00:00', '2026-12-06 12:00:00', 0)"
            ),
            [
                {"p": partition, "t": tenant, "q": f"q{i}", "d": f"{partition}-{i}", "e": b"\0"}
                for i in range(start, start + n)
            ],
        )


def counted(engine: Engine) -> dict[tuple[str, str], int]:
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT tenant, partition_key, entries FROM semantic_partition_sizes")
        )
        return {(t, p): int(n) for t, p, n in rows}


def truth(engine: Engine) -> dict[tuple[str, str], int]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT tenant, partition_key, count(*) FROM semantic_entries"
                " GROUP BY tenant, partition_key"
            )
        )
        return {(t, p): int(n) for t, p, n in rows}


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_sizes_up_kept_and_down(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'sizes.db'}"
    else:
        url = str(request.getfixturevalue("pg_bare_url"))
    upgrade_database(url, "0014")
    engine = create_engine(url)
    insert(engine, "a", "pa", 5)
    insert(engine, "b", "pb", 2)
    upgrade_database(url, "0015")
    assert counted(engine) == truth(engine) == {("a", "pa"): 5, ("b", "pb"): 2}
    insert(engine, "a", "pa2", 3)  # a new partition, in one statement of three rows
    insert(engine, "a", "pa", 1, start=5)
    assert counted(engine) == truth(engine) == {("a", "pa"): 6, ("a", "pa2"): 3, ("b", "pb"): 2}
    with engine.begin() as conn:  # a bulk delete across partitions, one emptied
        conn.execute(
            text("DELETE FROM semantic_entries WHERE partition_key = 'pa2' OR question = 'q0'")
        )
    assert counted(engine) == truth(engine) == {("a", "pa"): 5, ("b", "pb"): 1}
    with engine.begin() as conn:  # a row moved to another partition and tenant
        conn.execute(
            text(
                "UPDATE semantic_entries SET partition_key = 'pb', tenant = 'b', "
                "question_digest = 'moved' WHERE question = 'q1' AND partition_key = 'pa'"
            )
        )
        conn.execute(text("UPDATE semantic_entries SET hit_count = hit_count + 1"))
    assert counted(engine) == truth(engine) == {("a", "pa"): 4, ("b", "pb"): 2}
    with engine.begin() as conn:  # a rolled-back change leaves the counts as they were
        conn.execute(text("DELETE FROM semantic_entries"))
        sizes = "SELECT count(*) FROM semantic_partition_sizes"
        assert conn.execute(text(sizes)).scalar_one() == 0  # inside it: gone with them
        conn.rollback()
    assert counted(engine) == truth(engine) == {("a", "pa"): 4, ("b", "pb"): 2}
    command.downgrade(alembic_config(url), "0014")
    assert "semantic_partition_sizes" not in tables(url)
    insert(engine, "a", "pa", 1, start=50)  # no trigger left behind writing to nothing
    assert truth(engine)[("a", "pa")] == 5
    engine.dispose()
