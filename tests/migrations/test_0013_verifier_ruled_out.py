"""Migration 0013 adds ``verifier_ruled_out`` (gateway/calibration_ruled_out.py),
empty: every tenant's cut is what its labels give until the first refresh writes its
floor; the downgrade drops it and keeps the samples."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command

from migrations.runner import alembic_config, upgrade_database
from tests.migrations.test_migrations import tables


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_ruled_out_up_and_down(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'ruled_out.db'}"
    else:
        url = str(request.getfixturevalue("pg_bare_url"))
    upgrade_database(url, "0012")
    assert "verifier_ruled_out" not in tables(url)
    upgrade_database(url, "0013")
    assert {"verifier_ruled_out", "misfire_samples"} <= tables(url)
    command.downgrade(alembic_config(url), "0012")
    assert "verifier_ruled_out" not in tables(url) and "misfire_samples" in tables(url)
