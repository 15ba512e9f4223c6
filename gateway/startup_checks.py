"""What ``cachegate serve`` checks before it starts the server: a database URL that
names no database this build can open (``bogus://x``), or one that does not answer,
is one ``error:`` line and exit status 2, as a bad port or Redis URL is. It failed in
the lifespan's migration instead, inside uvicorn: a ~150-line "Application startup
failed" traceback and status 3 (a review, session 40). The URL is shown without its
password; the error is named by its type only (a driver's message can quote the URL).
"""

from __future__ import annotations

from sqlalchemy import create_engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from semantic.store_db import postgres_connect_args


def check_database(url: str, timeout: int = 5) -> None:
    """Raise ValueError (one line) unless ``url`` opens a database that answers; SQLite
    files are created by the migration, so only their URL is checked."""
    try:
        parsed = make_url(url)
        parsed.get_dialect()
    except Exception as exc:
        raise ValueError(
            "CACHEGATE_DATABASE_URL is not a database URL this gateway can open "
            f"({type(exc).__name__}); use postgresql+psycopg://… or sqlite:///…"
        ) from None
    if parsed.get_backend_name() == "sqlite":
        return
    shown = parsed.render_as_string(hide_password=True)
    postgres = parsed.get_backend_name() == "postgresql"
    args = postgres_connect_args(url, connect_timeout=timeout) if postgres else {}
    engine = create_engine(url, connect_args=args, hide_parameters=True)
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
