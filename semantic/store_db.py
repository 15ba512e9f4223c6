"""The database side of the entry store: an engine with the settings the cache relies
on, and database errors turned into ``StoreUnavailableError`` (the URL is rendered
without its password by the caller)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.pool import StaticPool

from semantic.errors import StoreUnavailableError


def is_deadlock(exc: sa_exc.DBAPIError) -> bool:
    """PostgreSQL ended the transaction to break a deadlock (SQLSTATE 40P01): nothing it
    did was kept, so running it again is safe. Two writers into one partition can meet
    so since the partition counts' triggers (migration 0015): an embedder carry-over
    holds the partition's count row while it waits on a backfill's new question, which
    waits on that row."""
    return getattr(exc.orig, "sqlstate", None) == "40P01"


def _is_missing_schema(exc: sa_exc.DBAPIError) -> bool:
    # PostgreSQL "undefined_table" arrives as ProgrammingError (SQLite's as OperationalError).
    return getattr(exc.orig, "sqlstate", None) == "42P01"


#: Errors that say the database cannot do the work now, not that the work is wrong:
#: down, refusing or timing out (OperationalError: lock and statement timeouts too), a
#: broken connection (InterfaceError), no pooled connection free in time (TimeoutError),
#: or a server in a state that refuses it (InternalError: PostgreSQL's class 25, a
#: read-only standby or demoted primary after a failover, SQLSTATE 25006; before
#: session 44 such a write was a 500 on admin routes and an ``error:internal`` backfill).
OUTAGE_ERRORS: tuple[type[Exception], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    sa_exc.InternalError,
)


@contextlib.contextmanager
def unavailable_on_db_errors(url: str) -> Iterator[None]:
    try:
        yield
    except OUTAGE_ERRORS as exc:
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


#: libpq TCP keepalives and ``tcp_user_timeout`` on every PostgreSQL connection: a host
#: that stops answering (a dropped route, a frozen VM) breaks the read after about 25 s
#: (10 s idle, then 3 probes 5 s apart) or once sent data stays unacknowledged for 20 s,
#: instead of the operating system's TCP timeout (minutes to hours). A server that is
#: alive answers the probes from its kernel, so a long query is never cut by them.
KEEPALIVES: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 20_000,  # milliseconds
}

#: ``lock_timeout`` of the request-path engines (milliseconds): a table lock held
#: elsewhere (another replica's migration, a manual ``LOCK TABLE``) fails a statement
#: after this long, which the request path treats as the database being unavailable
#: (a lookup misses, a backfill is skipped, authentication falls back to its last
#: answer or answers 503), instead of holding a worker thread for as long as the lock.
LOCK_TIMEOUT_MS = 3_000

#: ``statement_timeout`` of the hit path's reads (milliseconds): a lookup reads a few
#: rows by primary key, so a read slower than this is an overloaded or stuck server,
#: and the lookup misses (fails open) instead of holding one of the few lookup threads.
HIT_READ_TIMEOUT_MS = 3_000

#: Drivers that hand their keyword arguments to libpq (which knows the settings above).
_LIBPQ_DRIVERS = frozenset({"psycopg", "psycopg2", "psycopg2cffi"})


def postgres_connect_args(
    url: URL | str,
    *,
    connect_timeout: float = 5.0,
    lock_timeout_ms: int | None = LOCK_TIMEOUT_MS,
    statement_timeout_ms: int | None = None,
) -> dict[str, Any]:
    """``connect_args`` for a PostgreSQL engine: connect timeout, TCP keepalives,
    ``tcp_user_timeout`` and the session's ``lock_timeout`` (and ``statement_timeout``
    when given; the store's engine has none, as an index rebuild or a large delete may
    rightly take long).

    What the URL sets wins: a keepalive setting in its query is left alone, and its
    ``options`` (a ``search_path``, say) are kept and come after ours, so a
    ``-c lock_timeout=...`` given there overrides this one. The engine's URL keeps its
    ``options``; the connection gets them here, merged."""
    parsed = make_url(url)
    args: dict[str, Any] = {"connect_timeout": max(1, round(connect_timeout))}
    if parsed.get_driver_name() not in _LIBPQ_DRIVERS:
        return args
    args.update({k: v for k, v in KEEPALIVES.items() if k not in parsed.query})
    ours = []
    if lock_timeout_ms is not None:
        ours.append(f"-c lock_timeout={int(lock_timeout_ms)}")
    if statement_timeout_ms is not None:
        ours.append(f"-c statement_timeout={int(statement_timeout_ms)}")
    given = parsed.query.get("options")
    own = [given] if isinstance(given, str) else list(given or ())
    if ours or own:
        args["options"] = " ".join([*ours, *own])
    return args


def make_engine(
    url: str,
    *,
    connect_timeout: float = 5.0,
    lock_timeout_ms: int | None = LOCK_TIMEOUT_MS,
    statement_timeout_ms: int | None = None,
) -> Engine:
    """An engine with the settings the cache relies on (WAL for SQLite; on PostgreSQL
    the connect timeout, TCP keepalives and ``lock_timeout`` of
    :func:`postgres_connect_args`, and by default no ``statement_timeout``: the index
    rebuild reads the whole table through the store's engine and an invalidation may
    delete many rows; the hit path's reads get their own engine with one)."""
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
        connect_args = postgres_connect_args(
            parsed,
            connect_timeout=connect_timeout,
            lock_timeout_ms=lock_timeout_ms,
            statement_timeout_ms=statement_timeout_ms,
        )
    return create_engine(
        parsed, connect_args=connect_args, pool_pre_ping=True, hide_parameters=HIDE_PARAMETERS
    )
