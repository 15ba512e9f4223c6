"""Migration 0016 adds ``verifier_ruled_out.evidence`` to the table's key
(gateway/calibration_ruled_out.py): a floor kept before it reads ``"*"`` (it holds
under every retrieval, as it did) and floors of one tenant, target and scale may then
differ by evidence; the downgrade keeps the highest of them, one row a key."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text

from migrations.runner import alembic_config, upgrade_database

AT = "'2026-12-07 12:00:00'"


def rows(url: str) -> list[tuple[object, ...]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            names = {c["name"] for c in inspect(conn).get_columns("verifier_ruled_out")}
            picked = "tenant_id, band_cut" + (", evidence" if "evidence" in names else "")
            query = f"SELECT {picked} FROM verifier_ruled_out ORDER BY tenant_id, band_cut"
            return [tuple(r) for r in conn.execute(text(query))]
    finally:
        engine.dispose()


def insert(url: str, tenant: str, band_cut: float, evidence: str | None = None) -> None:
    columns = "tenant_id, target, scales, band_cut, updated_at"
    values = f"'{tenant}', 0.01, 'm', {band_cut}, {AT}"
    if evidence is not None:
        columns, values = f"{columns}, evidence", f"{values}, '{evidence}'"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO verifier_ruled_out ({columns}) VALUES ({values})"))
    engine.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_evidence_up_and_down(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'ruled_out.db'}"
    else:
        url = str(request.getfixturevalue("pg_bare_url"))
    upgrade_database(url, "0015")
    insert(url, "a", 0.99)  # kept before the upgrade
    upgrade_database(url, "0016")
    assert rows(url) == [("a", 0.99, "*")]
    insert(url, "a", 0.995, "0.860000@minilm")  # the same key but for the evidence
    insert(url, "b", 0.97)  # a replica of before the upgrade writes no evidence
    assert rows(url) == [("a", 0.99, "*"), ("a", 0.995, "0.860000@minilm"), ("b", 0.97, "*")]
    command.downgrade(alembic_config(url), "0015")
    assert rows(url) == [("a", 0.995), ("b", 0.97)]  # the strictest of each key stays
