"""Fixtures for the semantic tests: one real embedder per session, real SQLite
files, and a fresh PostgreSQL schema per test (so parallel runs never collide)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from migrations.runner import upgrade_database
from semantic.embedder import Embedder
from semantic.model_files import bundled_model_path
from semantic.store import EntryStore
from tests.semantic.helpers import PG_SERVER_URL, ManualClock


@pytest.fixture(scope="session")
def other_embedder() -> Embedder:
    """The same weights loaded by path under another name: another embedder id."""
    return Embedder(bundled_model_path(), name="minilm-by-path", progress=False)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A migrated SQLite file of its own."""
    url = f"sqlite:///{tmp_path / 'semantic.db'}"
    upgrade_database(url)
    return url


@pytest.fixture
def store(sqlite_url: str) -> Iterator[EntryStore]:
    """A real SQLite entry store (files that need another kind define their own)."""
    entry_store = EntryStore(sqlite_url)
    yield entry_store
    entry_store.close()


def _pg_reachable() -> str | None:
    import psycopg

    try:
        with psycopg.connect(
            "host=127.0.0.1 port=5432 user=postgres dbname=test", connect_timeout=3
        ) as conn:
            conn.execute("select 1")
    except psycopg.Error as exc:
        return f"PostgreSQL on 127.0.0.1:5432 is unreachable: {exc}"
    return None


@pytest.fixture(scope="session")
def pg_server() -> str:
    reason = _pg_reachable()
    if reason is not None:
        pytest.skip(reason)
    return PG_SERVER_URL


@pytest.fixture
def pg_bare_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty schema on the PostgreSQL server, dropped afterwards."""
    import psycopg

    schema = f"cg_semantic_{uuid.uuid4().hex[:12]}"
    dsn = "host=127.0.0.1 port=5432 user=postgres dbname=test"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{pg_server}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def pg_url(pg_bare_url: str) -> str:
    """A migrated schema of its own on the PostgreSQL server."""
    upgrade_database(pg_bare_url)
    return pg_bare_url
