"""semantic_fences: when each tenant's semantic cache was last invalidated.

An admin invalidation used to race a request already waiting for the model: its
lookup missed before the invalidation, its answer was stored after it, and was then
served until its TTL, the very answer the operator meant to remove. An invalidation
now commits a fence (the tenant's time of invalidation) before it deletes, and a
backfill of a question asked before the fence deletes what it wrote
(semantic/fences.py). One row per tenant that was ever invalidated; the table starts
empty, so nothing stored before the upgrade is affected.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "semantic_fences",
        sa.Column("tenant", sa.String(length=255), nullable=False),
        sa.Column("fenced_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", name=op.f("pk_semantic_fences")),
    )


def downgrade() -> None:
    op.drop_table("semantic_fences")
