from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from alembic import command
from sqlalchemy import create_engine, insert, inspect, select

from migrations.runner import alembic_config, migrations_dir, upgrade_database
from semantic.errors import StoreUnavailableError
from tests.semantic.helpers import UNREACHABLE_PG_URL

REPO = Path(__file__).resolve().parents[2]


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrations_folder_is_found() -> None:
    assert migrations_dir() == REPO / "migrations"
    assert (migrations_dir() / "versions" / "0001_semantic_entries.py").is_file()


def check_models_match_migrations(url: str) -> None:
    # `alembic check`: autogenerate against the migrated database finds nothing to do.
    command.check(alembic_config(url))


def test_fresh_sqlite_upgrade_check_and_downgrade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade_database(url)
    assert {"semantic_entries", "alembic_version"} <= tables(url)
    check_models_match_migrations(url)
    upgrade_database(url)  # idempotent
    command.downgrade(alembic_config(url), "base")
    assert "semantic_entries" not in tables(url)


@pytest.mark.postgres
def test_fresh_postgres_upgrade_check_and_downgrade(pg_bare_url: str) -> None:
    upgrade_database(pg_bare_url)
    assert {"semantic_entries", "alembic_version"} <= tables(pg_bare_url)
    check_models_match_migrations(pg_bare_url)
    command.downgrade(alembic_config(pg_bare_url), "base")
    assert "semantic_entries" not in tables(pg_bare_url)


def test_unreachable_database_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailableError):
        upgrade_database(UNREACHABLE_PG_URL)


def test_alembic_cli_with_repo_ini(tmp_path: Path) -> None:
    """The plain CLI works from the repository with -x url (the environment is not read)."""
    by_x = tmp_path / "by_x.db"
    alembic = [sys.executable, "-m", "alembic", "-c", str(REPO / "alembic.ini")]
    subprocess.run(
        [*alembic, "-x", f"url=sqlite:///{by_x}", "upgrade", "head"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    assert {"semantic_entries", "tenants", "api_keys"} <= set(tables(f"sqlite:///{by_x}"))


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_upgrade_from_0003_keeps_entries_and_adds_the_change_log(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """An existing database (at 0003, with entries) upgrades in place to the change log."""
    from datetime import UTC, datetime

    from semantic.models import CacheChange, SemanticEntry
    from semantic.store import EntryStore, NewEntry

    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = str(request.getfixturevalue("pg_bare_url"))
    upgrade_database(url, "0003")
    assert "cache_changes" not in tables(url)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    engine = create_engine(url)
    with engine.begin() as conn:  # a row written by the 0003-era code
        conn.execute(
            insert(SemanticEntry),
            {
                "partition_key": "p" * 64,
                "tenant": "acme",
                "question": "Old question?",
                "normalized_question": "old question",
                "question_digest": "d" * 64,
                "answer": {"old": True},
                "embedding": b"\0" * 16,
                "embedder_id": "e",
                "created_at": now,
                "updated_at": now,
            },
        )
    engine.dispose()

    upgrade_database(url)
    assert {"cache_changes", "semantic_entries"} <= tables(url)
    check_models_match_migrations(url)
    store = EntryStore(url)
    try:
        assert store.count() == 1  # the old entry survived
        new = NewEntry("q" * 64, "acme", "New?", {"new": True}, np.ones(4, "f4"), "e")
        stored, _ = store.upsert(new, now=now)
        with store.engine.connect() as conn:
            logged = conn.execute(select(CacheChange.op, CacheChange.entry_id)).all()
        assert [tuple(row) for row in logged] == [("upsert", stored.id)]
    finally:
        store.close()
    command.downgrade(alembic_config(url), "0003")
    assert "cache_changes" not in tables(url) and "semantic_entries" in tables(url)


@pytest.mark.postgres
def test_replicas_migrating_at_once_all_succeed(pg_bare_url: str) -> None:
    """N gateways started together on a fresh database: one migrates, the others wait on
    the advisory lock and find the schema current (without it, the others fail with
    duplicate-table errors). Separate processes, as replicas are: Alembic's context is
    process-global."""
    code = "import sys; from migrations.runner import upgrade_database as up; up(sys.argv[1])"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, pg_bare_url],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], "\n".join(outputs)
    check_models_match_migrations(pg_bare_url)
