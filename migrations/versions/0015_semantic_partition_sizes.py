"""semantic_partition_sizes: each partition's entry count, kept by triggers.

Every backfill checks its tenant's bounds (``max_semantic_entries``,
``max_semantic_partitions``: gateway/proxy/semantic_limits.py) under the cache's write
lock, which every tenant's backfills share. The check was a GROUP BY over the tenant's
entries: 50-120 ms at 100,000 entries on PostgreSQL, so one large tenant held every
tenant's backfills to about ten a second per replica. The counts now live in this table,
one row per partition, kept by triggers on ``semantic_entries`` in the transaction of
each change (whatever wrote it: a backfill, an invalidation, a purge, an embedder
carry-over, another replica), and the check reads the tenant's rows.

PostgreSQL: statement-level triggers over transition tables for INSERT and DELETE (a
delete of 100,000 rows updates each partition's row once, not 100,000 times; rows are
locked in key order, so concurrent deletes across partitions do not deadlock on them),
and a row-level trigger for an UPDATE that moves a row to another tenant or partition
(none does today); the functions keep the schema they were created in (``SET
search_path FROM CURRENT``), so a writer with another search path counts too. SQLite:
row-level triggers (one writer at a time). The count and the triggers are made under a
lock that holds writers (a replica of before this migration still running) until the
migration commits, so no write falls between them.

A later migration that rebuilds ``semantic_entries`` on SQLite (``batch_alter_table``
copies the table) drops these triggers and must create them again.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PG = [
    """
    CREATE FUNCTION cachegate_sizes_inserted() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
        INSERT INTO semantic_partition_sizes AS s (tenant, partition_key, entries)
        SELECT tenant, partition_key, count(*) FROM inserted
        GROUP BY tenant, partition_key ORDER BY tenant, partition_key
        ON CONFLICT (tenant, partition_key) DO UPDATE SET entries = s.entries + EXCLUDED.entries;
        RETURN NULL;
    END $$
    """,
    """
    CREATE FUNCTION cachegate_sizes_deleted() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
        PERFORM 1 FROM semantic_partition_sizes s
        WHERE (s.tenant, s.partition_key) IN (SELECT tenant, partition_key FROM deleted)
        ORDER BY s.tenant, s.partition_key FOR UPDATE;
        UPDATE semantic_partition_sizes s SET entries = s.entries - d.n
        FROM (SELECT tenant, partition_key, count(*) AS n FROM deleted
              GROUP BY tenant, partition_key) d
        WHERE s.tenant = d.tenant AND s.partition_key = d.partition_key;
        DELETE FROM semantic_partition_sizes s WHERE s.entries <= 0
        AND (s.tenant, s.partition_key) IN (SELECT tenant, partition_key FROM deleted);
        RETURN NULL;
    END $$
    """,
    """
    CREATE FUNCTION cachegate_sizes_moved() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
        UPDATE semantic_partition_sizes SET entries = entries - 1
        WHERE tenant = OLD.tenant AND partition_key = OLD.partition_key;
        DELETE FROM semantic_partition_sizes
        WHERE tenant = OLD.tenant AND partition_key = OLD.partition_key AND entries <= 0;
        INSERT INTO semantic_partition_sizes AS s (tenant, partition_key, entries)
        VALUES (NEW.tenant, NEW.partition_key, 1)
        ON CONFLICT (tenant, partition_key) DO UPDATE SET entries = s.entries + 1;
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER semantic_sizes_insert AFTER INSERT ON semantic_entries
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT
    EXECUTE FUNCTION cachegate_sizes_inserted()
    """,
    """
    CREATE TRIGGER semantic_sizes_delete AFTER DELETE ON semantic_entries
    REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT
    EXECUTE FUNCTION cachegate_sizes_deleted()
    """,
    """
    CREATE TRIGGER semantic_sizes_move AFTER UPDATE OF tenant, partition_key
    ON semantic_entries FOR EACH ROW
    WHEN (OLD.tenant IS DISTINCT FROM NEW.tenant
          OR OLD.partition_key IS DISTINCT FROM NEW.partition_key)
    EXECUTE FUNCTION cachegate_sizes_moved()
    """,
]

_SQLITE_ADD = """
    INSERT INTO semantic_partition_sizes (tenant, partition_key, entries)
    VALUES (NEW.tenant, NEW.partition_key, 1)
    ON CONFLICT (tenant, partition_key) DO UPDATE SET entries = entries + 1;
"""
_SQLITE_REMOVE = """
    UPDATE semantic_partition_sizes SET entries = entries - 1
    WHERE tenant = OLD.tenant AND partition_key = OLD.partition_key;
    DELETE FROM semantic_partition_sizes
    WHERE tenant = OLD.tenant AND partition_key = OLD.partition_key AND entries <= 0;
"""
_SQLITE = [
    "CREATE TRIGGER semantic_sizes_insert AFTER INSERT ON semantic_entries"
    f" BEGIN {_SQLITE_ADD} END",
    "CREATE TRIGGER semantic_sizes_delete AFTER DELETE ON semantic_entries"
    f" BEGIN {_SQLITE_REMOVE} END",
    "CREATE TRIGGER semantic_sizes_move AFTER UPDATE OF tenant, partition_key ON semantic_entries"
    " WHEN OLD.tenant IS NOT NEW.tenant OR OLD.partition_key IS NOT NEW.partition_key"
    f" BEGIN {_SQLITE_REMOVE} {_SQLITE_ADD} END",
]

_TRIGGERS = ("semantic_sizes_insert", "semantic_sizes_delete", "semantic_sizes_move")
_FUNCTIONS = ("cachegate_sizes_inserted", "cachegate_sizes_deleted", "cachegate_sizes_moved")


def upgrade() -> None:
    op.create_table(
        "semantic_partition_sizes",
        sa.Column("tenant", sa.String(length=255), nullable=False),
        sa.Column("partition_key", sa.String(length=64), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant", "partition_key", name=op.f("pk_semantic_partition_sizes")
        ),
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        # Writers wait from here to the commit: a replica of before this migration that
        # wrote between the count and the triggers would be counted by neither (a
        # review found a partition counted forever after its last entry went). Reads
        # go on. SQLite: the migration's transaction already holds the write lock.
        op.execute("LOCK TABLE semantic_entries IN SHARE ROW EXCLUSIVE MODE")
    # What is there now; the triggers keep it from here, in the same transaction.
    op.execute(
        "INSERT INTO semantic_partition_sizes (tenant, partition_key, entries) "
        "SELECT tenant, partition_key, count(*) FROM semantic_entries "
        "GROUP BY tenant, partition_key"
    )
    for statement in _PG if postgres else _SQLITE:
        op.execute(statement)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for trigger in _TRIGGERS:
        op.execute(
            f"DROP TRIGGER IF EXISTS {trigger} ON semantic_entries"
            if postgres
            else f"DROP TRIGGER IF EXISTS {trigger}"
        )
    if postgres:
        for function in _FUNCTIONS:
            op.execute(f"DROP FUNCTION IF EXISTS {function}()")
    op.drop_table("semantic_partition_sizes")
