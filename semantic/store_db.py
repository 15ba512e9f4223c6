"""The database side of the entry store: an engine with the settings the cache relies
on, and database errors turned into ``StoreUnavailableError`` (the URL is rendered
without its password by the caller)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import StaticPool

from semantic.errors import StoreUnavailableError


def _is_missing_schema(exc: sa_exc.DBAPIError) -> bool:
    # PostgreSQL "undefined_table" arrives as ProgrammingError (SQLite's as OperationalError).
    return getattr(exc.orig, "sqlstate", None) == "42P01"


@contextlib.contextmanager
def unavailable_on_db_errors(url: str) -> Iterator[None]:
    try:
        yield
    except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError) as exc:
        detail = str(getattr(exc, "orig", None) or exc).strip()
        hint = " (run migrations.runner.upgrade_database)" if "no such table" in detail else ""
        raise StoreUnavailableError(
            f"semantic store {url} unavailable: {detail[:300]}{hint}"
        ) from exc
    except sa_exc.ProgrammingError as exc:
        if _is_missing_schema(exc):
            raise StoreUnavailableError(
                f"semantic store {url} has no schema; run migrations.runner.upgrade_database"
            ) from exc
        raise


#: Every engine is made with ``hide_parameters=True``: SQLAlchemy otherwise writes a failed
#: statement's bound values into the exception's message, and so into any log of it, and
#: those values are questions and answers, which must never reach a log.
HIDE_PARAMETERS = True


def make_engine(url: str, *, connect_timeout: float = 5.0) -> Engine:
    """An engine with the settings the cache relies on (WAL for SQLite, timeouts)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        memory = parsed.database in (None, "", ":memory:")
        engine = create_engine(
            parsed,
            # Pooled connections move between the gateway's threads.
            connect_args={"check_same_thread": False, "timeout": connect_timeout},
            poolclass=StaticPool if memory else None,
            hide_parameters=HIDE_PARAMETERS,
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            # WAL: lookups (readers) and backfills (the writer) do not block each other.
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        connect_args["connect_timeout"] = max(1, round(connect_timeout))
    return create_engine(
        parsed, connect_args=connect_args, pool_pre_ping=True, hide_parameters=HIDE_PARAMETERS
    )
