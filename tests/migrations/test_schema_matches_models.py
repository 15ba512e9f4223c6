"""The migrated schema is exactly what the models declare: a column, index or table
added to a model without its migration (or the other way round) fails here, on both
backends, before it fails on an operator's database."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, Table, create_engine

import gateway.models
import semantic.models
from migrations.runner import upgrade_database

METADATA = [semantic.models.Base.metadata, gateway.models.Base.metadata]


def differences(url: str, metadata: list[MetaData]) -> list[object]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            # a list works as in env.py (target_metadata); the stub says one MetaData
            context = MigrationContext.configure(conn)
            return list(compare_metadata(context, metadata))  # type: ignore[arg-type]
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_the_head_schema_matches_the_models(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'head.db'}"
    else:
        url = str(request.getfixturevalue("pg_bare_url"))
    upgrade_database(url)
    assert differences(url, METADATA) == []
    # The control: a table a model declares and no migration creates is seen.
    extra = MetaData()
    Table("declared_only", extra, Column("id", Integer, primary_key=True))
    found = differences(url, [*METADATA, extra])
    assert [d[0] for d in found if isinstance(d, tuple)] == ["add_table"]
