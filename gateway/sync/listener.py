"""The LISTEN side of replica sync: a dedicated autocommit PostgreSQL connection.

Kept apart from the SQLAlchemy pool because a listening connection is stateful
(its LISTEN must outlive any one transaction) and is read from one thread only,
the feed's (:mod:`gateway.sync.feed`). A notification only says "poll now"; what to
replay always comes from the change log, so a notification lost while this
connection was down costs one poll interval, never a change.

It carries the pool's TCP keepalives and ``tcp_user_timeout``
(:func:`semantic.store_db.postgres_connect_args`): it sits idle in a read for as
long as nothing is written, so a host that stops answering (a dropped route, a
failover) would otherwise go unnoticed for the operating system's keepalive time
(over two hours on Linux), with no wake-up coming and ``listening`` still reported;
with them the read fails within about 25 s and the feed reconnects.
"""

from __future__ import annotations

import contextlib
from typing import Any

from sqlalchemy import Engine

from semantic.changes import CHANNEL
from semantic.store_db import postgres_connect_args


class Listener:
    """``LISTEN cachegate_changes`` on the engine's database, filtered to its schema."""

    def __init__(self, engine: Engine, connect_timeout: float = 5.0) -> None:
        # The same host, database, user and options (search_path) as the engine's pool,
        # and the connect arguments make_engine gives it (create_connect_args reads the
        # URL only): what the URL sets wins there, as in the pool.
        args, kwargs = engine.dialect.create_connect_args(engine.url)
        self._args = list(args)
        ours = postgres_connect_args(engine.url, connect_timeout=connect_timeout)
        self._kwargs = dict(kwargs) | ours | {"autocommit": True}
        self._conn: Any = None
        self._schema = ""

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def connect(self) -> None:
        import psycopg

        self.close()
        conn = psycopg.connect(*self._args, **self._kwargs)
        try:
            conn.execute(f"LISTEN {CHANNEL}")
            row = conn.execute("SELECT coalesce(current_schema(), '')").fetchone()
        except BaseException:
            conn.close()
            raise
        # Writers send their current_schema() as the payload (semantic.changes).
        self._schema = str(row[0]) if row else ""
        self._conn = conn

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` s; True on a notification for this schema, or when
        the connection broke (either way the caller should poll now)."""
        import psycopg

        if not self.connected:
            return True
        try:
            for note in self._conn.notifies(timeout=timeout):
                if note.payload == self._schema:
                    return True
        except psycopg.Error:
            self.close()
            return True
        return False

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
