"""What ``cachegate serve`` checks before it starts the server: a database URL that
names no database this build can open (``bogus://x``), or one that does not answer,
is one ``error:`` line and exit status 2, as a bad port or Redis URL is. It failed in
the lifespan's migration instead, inside uvicorn: a ~150-line "Application startup
failed" traceback and status 3 (a review, session 40). The URL is shown without its
password; the error is named by its type only (a driver's message can quote the URL).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from semantic.store_db import postgres_connect_args


def check_database(url: str, timeout: int = 5) -> None:
    """Raise ValueError (one line) unless ``url`` opens a database that answers; SQLite
    files are created by the migration, so only their URL (and directory) is checked."""
    engine = database_engine(url, timeout)
    if engine is None:
        return
    shown = engine.url.render_as_string(hide_password=True)
    try:
        with engine.connect():
            pass
    except sa_exc.SQLAlchemyError as exc:
        raise ValueError(
            f"the database at {shown} did not answer ({type(exc).__name__}); "
            "check CACHEGATE_DATABASE_URL and that the server runs (cachegate doctor)"
        ) from None
    finally:
        engine.dispose()


def database_engine(url: str, timeout: int = 5) -> Engine | None:
    """An engine for ``url`` (not yet connected; None for SQLite, whose directory is
    made here), or a one-line ValueError for a URL, driver or directory that cannot
    be (``cachegate migrate`` reports an unreachable server itself)."""
    try:
        parsed = make_url(url)
        parsed.get_dialect()
    except Exception as exc:
        raise ValueError(
            "CACHEGATE_DATABASE_URL is not a database URL this gateway can open "
            f"({type(exc).__name__}); use postgresql+psycopg://… or sqlite:///…"
        ) from None
    shown = parsed.render_as_string(hide_password=True)
    postgres = parsed.get_backend_name() == "postgresql"
    if postgres and parsed.get_driver_name() != "psycopg":
        # psycopg2, asyncpg …: not installed, and a traceback at create_engine (session
        # 45's review); doctor says the same
        raise ValueError(
            f"{shown} uses the driver {parsed.get_driver_name()!r} (cachegate ships psycopg"
            " 3): write the URL as postgresql+psycopg://…"
        )
    if parsed.get_backend_name() == "sqlite":
        _sqlite_directory(parsed.database)
        return None
    try:
        args = postgres_connect_args(url, connect_timeout=timeout) if postgres else {}
        return create_engine(url, connect_args=args, hide_parameters=True)
    except Exception as exc:  # a driver not installed (mysql://: MySQLdb) is no traceback
        raise ValueError(
            f"cannot open {shown} ({type(exc).__name__}: no driver for it here); use "
            "postgresql+psycopg://… or sqlite:///…"
        ) from None


def _sqlite_directory(database: str | None) -> None:
    """Create the SQLite file's directory, as the migration would, or say in one line
    why it cannot be (a data dir that is a file, or under /proc): uvicorn's traceback
    before (session 45's review)."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    parent = Path(database).expanduser().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            f"the SQLite database's directory {parent} cannot be created "
            f"({type(exc).__name__}); check CACHEGATE_DATA_DIR / CACHEGATE_DATABASE_URL"
        ) from None
