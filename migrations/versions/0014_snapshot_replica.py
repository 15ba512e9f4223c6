"""engine_snapshots.replica: which process wrote a snapshot.

Every gateway with the in-process engine writes its pool's counters to
``engine_snapshots``; against a shared PostgreSQL several replicas' rows interleaved,
and the report read them as one series (each drop taken for a restart: evictions
summed 5,030 for a true 10). The report now reads one series per replica (host:pid);
rows written before have none and read as one series of their own.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("engine_snapshots") as batch:
        batch.add_column(sa.Column("replica", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("engine_snapshots") as batch:
        batch.drop_column("replica")
