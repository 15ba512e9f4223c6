"""``cachegate migrate``: the database schema, ahead of a rollout or back after one.

The gateway migrates its database at start (``migrations.runner.upgrade_database``),
so this command is for the steps of docs/operations.md: migrate once before starting
new replicas, show where a database stands, or step back to a revision before
rolling back the code. Its URL is the gateway's own (``CACHEGATE_DATABASE_URL``, else
the SQLite file under ``CACHEGATE_DATA_DIR``) unless ``--url`` names another. Plain
``alembic`` reads neither: it needs ``-x url=...``, and the image has no
``alembic.ini``; this command works in both.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sqlalchemy.engine import make_url


def _cmd_migrate(args: argparse.Namespace) -> int:
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError
    from sqlalchemy import create_engine
    from sqlalchemy.exc import SQLAlchemyError

    from gateway.settings import get_settings
    from gateway.startup_checks import database_engine
    from migrations.runner import alembic_config, upgrade_database
    from semantic.errors import StoreUnavailableError

    settings = get_settings()
    url = args.url or settings.resolved_database_url()
    # a URL, driver or data dir no database opens: one line (exit 2), no traceback; the
    # SQLite file's directory is made as the gateway would (session 45's review)
    engine = database_engine(url)
    if engine is not None:
        engine.dispose()
    shown = make_url(url).render_as_string(hide_password=True)
    config = alembic_config(url)
    head = ScriptDirectory.from_config(config).get_current_head()
    try:
        if args.downgrade is not None:
            command.downgrade(config, args.downgrade)
        elif not args.show:
            upgrade_database(url, args.revision)
        engine = create_engine(url, hide_parameters=True)
        try:
            with engine.connect() as conn:
                current = MigrationContext.configure(conn).get_current_revision()
        finally:
            engine.dispose()
    except (StoreUnavailableError, SQLAlchemyError) as exc:
        print(
            f"error: cannot reach {shown} ({type(exc).__name__}; `cachegate doctor` says why)",
            file=sys.stderr,
        )
        return 1
    except CommandError as exc:  # an unknown revision: alembic's words name only it
        print(f"error: {exc}", file=sys.stderr)
        return 2
    state = "at head" if current == head else f"head is {head}"
    print(f"{shown}: revision {current or 'none (empty database)'} ({state})")
    return 0


def add_migrate_command(sub: Any) -> None:
    mig = sub.add_parser(
        "migrate", help="upgrade the database schema (or show it, or step it back)"
    )
    mig.add_argument("revision", nargs="?", default="head", help="upgrade to this revision (head)")
    mig.add_argument("--url", default=None, help="database URL (default: the gateway's own)")
    what = mig.add_mutually_exclusive_group()
    what.add_argument("--show", action="store_true", help="only print the current revision")
    what.add_argument(
        "--downgrade", metavar="REVISION", default=None, help="step back to this revision"
    )
    mig.set_defaults(func=_cmd_migrate)
