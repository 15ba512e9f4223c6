"""semantic_entries: the semantic cache's entries.

Revision ID: 0001
Revises:
Create Date: 2025-11-29

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "semantic_entries",
        # SQLite only auto-increments INTEGER PRIMARY KEY; elsewhere 64-bit ids.
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("partition_key", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=255), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("normalized_question", sa.Text(), nullable=False),
        sa.Column("question_digest", sa.String(length=64), nullable=False),
        sa.Column("answer", sa.JSON(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=False),
        sa.Column("embedder_id", sa.String(length=255), nullable=False),
        sa.Column("entities", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ttl_seconds", sa.Integer(), nullable=True),
        sa.Column("hit_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_hit_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_semantic_entries")),
        sa.UniqueConstraint(
            "partition_key",
            "question_digest",
            name=op.f("uq_semantic_entries_partition_key_question_digest"),
        ),
        sqlite_autoincrement=True,  # ids are never reused (see semantic.models)
    )
    op.create_index(
        op.f("ix_semantic_entries_tenant"), "semantic_entries", ["tenant"], unique=False
    )
    op.create_index(
        op.f("ix_semantic_entries_embedder_id"), "semantic_entries", ["embedder_id"], unique=False
    )
    op.create_index(
        op.f("ix_semantic_entries_expires_at"), "semantic_entries", ["expires_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_semantic_entries_expires_at"), table_name="semantic_entries")
    op.drop_index(op.f("ix_semantic_entries_embedder_id"), table_name="semantic_entries")
    op.drop_index(op.f("ix_semantic_entries_tenant"), table_name="semantic_entries")
    op.drop_table("semantic_entries")
