"""Alembic entry point for cachegate's single schema history.

Database URL, first match wins:

1. ``config.attributes["url"]`` — set in code by ``migrations.runner.upgrade_database``
   (or ``config.attributes["connection"]``, an open SQLAlchemy connection);
2. ``alembic -x url=...`` on the command line;
3. ``sqlalchemy.url`` from ``alembic.ini``.

The environment is not read here: ``gateway.settings`` is the one place that
does, and the gateway runs migrations in code with the URL it resolved.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, MetaData, create_engine, pool, text

from gateway.models import Base as GatewayBase
from semantic.models import Base as SemanticBase

config = context.config

# Only the alembic CLI has an ini file; programmatic runs keep the caller's logging.
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)

# Every table's metadata, for autogenerate and `alembic check`.
target_metadata: list[MetaData] = [SemanticBase.metadata, GatewayBase.metadata]


def database_url() -> str:
    url = (
        config.attributes.get("url")
        or context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
    )
    if not url:
        raise RuntimeError("no database URL: pass -x url=... or set sqlalchemy.url")
    return str(url)


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        # SQLite cannot ALTER most things; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )


def run_migrations_offline() -> None:
    """Emit SQL to stdout (``alembic upgrade head --sql``) without connecting."""
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


# Any constant: the key of the advisory lock every replica's migration takes.
MIGRATION_LOCK_KEY = 0x6361636865676174  # "cachegat"


def _migrate(connection: Connection) -> None:
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Gateways started together migrate one at a time: the others wait here,
            # then read the version table the first one committed and find nothing to
            # do. Transaction-scoped, so it is released at commit or rollback.
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        _migrate(connection)
        return
    # hide_parameters: a failed statement's bound values (stored questions, answers) never
    # in its error's text, which reaches the start-up log (a review, session 41)
    engine = create_engine(database_url(), poolclass=pool.NullPool, hide_parameters=True)
    try:
        with engine.connect() as connection:
            _configure(connection)
            _migrate(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
