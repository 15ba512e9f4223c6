"""The PostgreSQL rate-limit buckets' connections carry the store's TCP keepalives and
``tcp_user_timeout`` beside their own statement timeout and the URL's options: the
statement timeout is enforced by the server, so only these bound a call to a host
that stopped answering. Real PostgreSQL; what libpq was given is read back from the
open connection."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from gateway.proxy.ratelimit_shared import PostgresBuckets
from semantic.store_db import KEEPALIVES
from tests.gateway.conftest import PG_SERVER_URL

pytestmark = pytest.mark.postgres


def connected(url: str) -> dict[str, Any]:
    """The keepalive parameters, statement timeout and schema of a bucket connection."""
    buckets = PostgresBuckets(url, timeout=1.0)
    try:
        with buckets.engine.connect() as conn:
            params = conn.connection.dbapi_connection.info.get_parameters()  # type: ignore[union-attr]
            return {k: params.get(k) for k in KEEPALIVES} | {
                "statement_timeout": conn.execute(text("SHOW statement_timeout")).scalar(),
                "schema": conn.execute(text("SELECT current_schema()")).scalar(),
            }
    finally:
        buckets.engine.dispose()


def test_bucket_connections_have_keepalives(pg_schema: str) -> None:
    got = connected(f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}")
    keepalives = {k: str(v) for k, v in KEEPALIVES.items()}
    # Before: no keepalive parameter at all (libpq's defaults: two hours idle).
    assert got == keepalives | {"statement_timeout": "1s", "schema": pg_schema}


def test_what_the_url_sets_is_kept_and_the_statement_timeout_still_wins(
    pg_schema: str,
) -> None:
    url = (
        f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
        "&options=-cstatement_timeout%3D9s&keepalives_idle=30"
    )
    got = connected(url)
    assert got["keepalives_idle"] == "30" and got["tcp_user_timeout"] == "20000"
    assert got["statement_timeout"] == "1s" and got["schema"] == pg_schema
