"""concurrency_leases: the in-flight requests of each capped tenant, shared by replicas.

Used when the gateway's database is PostgreSQL and no Redis is configured
(``gateway/proxy/concurrency_shared.py``): a row per request in flight of a tenant with
``max_concurrent_requests``, deleted when it ends, with an expiry (the database's epoch
seconds) that its replica renews while it runs, so the rows of a replica that died stop
counting within a lease. The table exists on SQLite too (one history for both) but a
single SQLite replica counts in memory.

A gateway of an earlier session ignores the table (it counts per replica, as before);
one of this session that meets a database not yet migrated counts per replica too (the
store's failure is logged) until the migration has run.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "concurrency_leases",
        sa.Column("slot_key", sa.String(length=64), nullable=False),
        sa.Column("lease_id", sa.String(length=32), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("slot_key", "lease_id", name=op.f("pk_concurrency_leases")),
    )


def downgrade() -> None:
    op.drop_table("concurrency_leases")
