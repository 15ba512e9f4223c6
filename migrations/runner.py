"""Run the Alembic migrations of this package from code: ``upgrade_database(url)``.

One schema history holds every table (the semantic entries and change log, the
gateway's tenants, keys, policies and operations tables), so the runner lives
with the history, not in one of the packages whose tables it creates: the
gateway calls it at start-up, tests and benchmarks call it to make a database,
and ``semantic`` itself never runs migrations. Replicas migrating at once take
turns on a PostgreSQL advisory lock (``env.py``, so the ``alembic`` command line
takes it too).

The Alembic config is built here rather than read from ``alembic.ini``: that
file sits in the repository root, which an installed gateway does not have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from semantic.errors import StoreUnavailableError


def migrations_dir() -> Path:
    """The folder holding Alembic's ``env.py`` and ``versions/``: this package's own,
    in the repository and in site-packages alike."""
    return Path(__file__).resolve().parent


def alembic_config(url: str | None = None, *, connection: Any = None) -> Any:
    """An Alembic ``Config`` for ``url`` (or an open connection), built in code."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    # Passed as attributes, not main options: ini interpolation would mangle a '%' in a URL.
    if url is not None:
        config.attributes["url"] = url
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade_database(url: str, revision: str = "head") -> None:
    """``alembic upgrade head`` against ``url``; an unreachable database raises
    :class:`StoreUnavailableError` (the error the semantic store raises for it too)."""
    from alembic import command

    try:
        command.upgrade(alembic_config(url), revision)
    except (sa_exc.OperationalError, sa_exc.InterfaceError) as exc:
        safe = make_url(url).render_as_string(hide_password=True)
        raise StoreUnavailableError(f"cannot migrate {safe}: {exc.orig or exc}") from exc
