"""Fixtures of the migration tests: the semantic tests' fresh PostgreSQL schema per
test (``pg_bare_url``), imported rather than written twice."""

from __future__ import annotations

# Fixtures are found by name in a conftest's namespace, so importing them is enough.
from tests.semantic.conftest import pg_bare_url, pg_server

__all__ = ["pg_bare_url", "pg_server"]
