"""The LISTEN side of replica sync: a dedicated autocommit PostgreSQL connection.

Kept apart from the SQLAlchemy pool because a listening connection is stateful
(its LISTEN must outlive any one transaction) and is read from one thread only,
the feed's (:mod:`gateway.sync.feed`). A notification only says "poll now"; what to
replay always comes from the change log, so a notification lost while this
connection was down costs one poll interval, never a change.
"""

from __future__ import annotations

import contextlib
from typing import Any

from sqlalchemy import Engine

from semantic.changes import CHANNEL


class Listener:
    """``LISTEN cachegate_changes`` on the engine's database, filtered to its schema."""

    def __init__(self, engine: Engine, connect_timeout: float = 5.0) -> None:
        # The same host, database, user and options (search_path) as the engine's pool.
        args, kwargs = engine.dialect.create_connect_args(engine.url)
        self._args = list(args)
        self._kwargs = dict(kwargs) | {
            "autocommit": True,
            "connect_timeout": max(1, round(connect_timeout)),
        }
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
