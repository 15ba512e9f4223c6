"""gateway operations: audit log, misfire samples, request stats, engine snapshots.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=True),
        sa.Column("target", sa.String(length=255), nullable=True),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_events_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_events_tenant_id"), ["tenant_id"], unique=False)

    op.create_table(
        "engine_snapshots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("blocks_total", sa.Integer(), nullable=False),
        sa.Column("blocks_used", sa.Integer(), nullable=False),
        sa.Column("blocks_cached", sa.Integer(), nullable=False),
        sa.Column("bytes_per_block", sa.Integer(), nullable=False),
        sa.Column("evictions", sa.Integer(), nullable=False),
        sa.Column("query_blocks", sa.Integer(), nullable=False),
        sa.Column("hit_blocks", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_engine_snapshots")),
    )
    with op.batch_alter_table("engine_snapshots", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_engine_snapshots_at"), ["at"], unique=False)

    op.create_table(
        "misfire_samples",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("entry_id", sa.Integer(), nullable=True),
        sa.Column("partition_key", sa.String(length=64), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("matched_question", sa.Text(), nullable=False),
        sa.Column("served_answer", sa.Text(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("entity_comparison", sa.JSON(), nullable=True),
        sa.Column("label", sa.String(length=16), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("labeled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("labeled_by", sa.String(length=255), nullable=True),
        sa.Column("shadow_verdict", sa.String(length=16), nullable=True),
        sa.Column("shadow_similarity", sa.Float(), nullable=True),
        sa.Column("shadow_answer", sa.Text(), nullable=True),
        sa.Column("shadow_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_misfire_samples")),
    )
    with op.batch_alter_table("misfire_samples", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_misfire_samples_created_at"), ["created_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_misfire_samples_label"), ["label"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_misfire_samples_tenant_id"), ["tenant_id"], unique=False
        )

    op.create_table(
        "request_stats",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("cache", sa.String(length=16), nullable=False),
        sa.Column("semantic", sa.String(length=200), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_request_stats")),
    )
    with op.batch_alter_table("request_stats", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_request_stats_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_request_stats_tenant_id"), ["tenant_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("request_stats", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_request_stats_tenant_id"))
        batch_op.drop_index(batch_op.f("ix_request_stats_at"))

    op.drop_table("request_stats")
    with op.batch_alter_table("misfire_samples", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_misfire_samples_tenant_id"))
        batch_op.drop_index(batch_op.f("ix_misfire_samples_label"))
        batch_op.drop_index(batch_op.f("ix_misfire_samples_created_at"))

    op.drop_table("misfire_samples")
    with op.batch_alter_table("engine_snapshots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_engine_snapshots_at"))

    op.drop_table("engine_snapshots")
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_events_tenant_id"))
        batch_op.drop_index(batch_op.f("ix_audit_events_at"))

    op.drop_table("audit_events")
