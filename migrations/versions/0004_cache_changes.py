"""cache_changes: the change log replicas replay (semantic entries, tenants).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "cache_changes",
        # SQLite only auto-increments INTEGER PRIMARY KEY; elsewhere 64-bit.
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("op", sa.String(length=16), nullable=False),
        sa.Column("partition_key", sa.String(length=64), nullable=True),
        sa.Column("entry_id", sa.BigInteger(), nullable=True),
        sa.Column("tenant", sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_cache_changes")),
        sqlite_autoincrement=True,  # a pruned seq is never handed out again
    )
    op.create_index(op.f("ix_cache_changes_at"), "cache_changes", ["at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_cache_changes_at"), table_name="cache_changes")
    op.drop_table("cache_changes")
