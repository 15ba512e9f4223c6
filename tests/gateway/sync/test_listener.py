"""The LISTEN connection carries the pool's TCP keepalives, ``tcp_user_timeout`` and
session settings: it waits idle on the socket, where only keepalives notice a host
that stopped answering. Real PostgreSQL; what libpq was given is read back from the
open connection, the pool's own connection beside it as the reference."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import make_url

from gateway.sync.listener import Listener
from semantic.store_db import KEEPALIVES, make_engine

pytestmark = pytest.mark.postgres


def settings(conn: Any) -> dict[str, str]:
    """The keepalive parameters libpq was given and the session's lock timeout."""
    params = conn.info.get_parameters()
    lock = conn.execute("SHOW lock_timeout").fetchone()[0]
    return {k: params.get(k) for k in KEEPALIVES} | {"lock_timeout": lock}


def listened(url: str) -> tuple[dict[str, str], dict[str, str], str]:
    """(the listener's settings, the pool's, the listener's schema)."""
    engine = make_engine(url)
    listener = Listener(engine, connect_timeout=3)
    try:
        listener.connect()
        with engine.connect() as pooled:
            pool = settings(pooled.connection.dbapi_connection)
        return settings(listener._conn), pool, listener._schema
    finally:
        listener.close()
        engine.dispose()


def test_the_listen_connection_has_the_pools_keepalives(pg_url: str) -> None:
    mine, pool, schema = listened(pg_url)
    expected = {k: str(v) for k, v in KEEPALIVES.items()} | {"lock_timeout": "3s"}
    assert mine == pool == expected  # before: no keepalive parameter, lock_timeout "0"
    options = make_url(pg_url).query["options"]
    assert isinstance(options, str) and schema == options.split("=")[1]  # URL options kept


def test_what_the_url_sets_wins_on_the_listen_connection(pg_url: str) -> None:
    mine, pool, _ = listened(f"{pg_url}&keepalives_idle=30&options=-clock_timeout%3D5s")
    assert mine == pool
    assert mine["keepalives_idle"] == "30" and mine["keepalives_count"] == "3"
    assert mine["lock_timeout"] == "5s"
