from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect

from semantic.errors import StoreUnavailableError
from semantic.migrate import alembic_config, migrations_dir, upgrade_database
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
