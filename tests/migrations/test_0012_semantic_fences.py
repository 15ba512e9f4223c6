"""Migration 0012 adds ``semantic_fences`` (semantic/fences.py), empty: nothing stored
before the upgrade is affected; the downgrade drops it and keeps the entries."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command

from migrations.runner import alembic_config, upgrade_database
from tests.migrations.test_migrations import tables


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_fences_up_and_down(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'fences.db'}"
    else:
        url = str(request.getfixturevalue("pg_bare_url"))
    upgrade_database(url, "0011")
    assert "semantic_fences" not in tables(url)
    upgrade_database(url, "0012")
    assert {"semantic_fences", "semantic_entries"} <= tables(url)
    command.downgrade(alembic_config(url), "0011")
    assert "semantic_fences" not in tables(url) and "semantic_entries" in tables(url)
