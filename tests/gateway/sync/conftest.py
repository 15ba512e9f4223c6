"""Fixtures of the replica-sync tests: the semantic tests' migrated databases (a
SQLite file, a fresh PostgreSQL schema per test), imported rather than written
twice; the feed replays onto real semantic caches over them."""

from __future__ import annotations

# Fixtures are found by name in a conftest's namespace, so importing them is enough.
from tests.semantic.conftest import pg_bare_url, pg_server, pg_url, sqlite_url

__all__ = ["pg_bare_url", "pg_server", "pg_url", "sqlite_url"]
