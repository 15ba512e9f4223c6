"""Run the Alembic migrations in ``migrations/`` from code.

The history lives in the top-level ``migrations`` package (installed beside
``semantic``), so the Alembic config is built here rather than read from
``alembic.ini``: that file sits in the repository root, which an installed
gateway does not have.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from semantic.errors import StoreUnavailableError


def migrations_dir() -> Path:
    """The folder holding Alembic's ``env.py`` and ``versions/``."""
    # Sibling of this package both in the repository and in site-packages.
    sibling = Path(__file__).resolve().parent.parent / "migrations"
    if (sibling / "env.py").is_file():
        return sibling
    spec = importlib.util.find_spec("migrations")
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / "env.py").is_file():
            return Path(location)
    raise FileNotFoundError("cannot find the cachegate migrations folder (migrations/env.py)")


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
    :class:`StoreUnavailableError`."""
    from alembic import command

    try:
        command.upgrade(alembic_config(url), revision)
    except (sa_exc.OperationalError, sa_exc.InterfaceError) as exc:
        safe = make_url(url).render_as_string(hide_password=True)
        raise StoreUnavailableError(f"cannot migrate {safe}: {exc.orig or exc}") from exc
