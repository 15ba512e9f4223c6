"""rate_limit_buckets: per-tenant token buckets shared by the gateway replicas.

Used when the gateway's database is PostgreSQL and no Redis is configured
(``gateway/proxy/ratelimit_shared.py``): one atomic upsert per request. The
table exists on SQLite too (one history for both) but a single SQLite replica
keeps its buckets in memory.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_limit_buckets",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("allowed", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_rate_limit_buckets")),
    )


def downgrade() -> None:
    op.drop_table("rate_limit_buckets")
