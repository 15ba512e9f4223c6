"""tenants.namespace_id: an id minted when a tenant is created, part of its prefix namespace.

A tenant id is a slug an admin chooses, so a deleted tenant's id can be created
again. Without this column the new tenant inherited every KV block the old one
left in L1, L2, disk and Redis (namespace ``tenant:<id>``). With it the
namespace is ``tenant:<id>:<namespace_id>``: a re-created tenant starts with
nothing, and a deleted tenant's blocks are unreachable by key (orphaned: they
age out of every tier by its own eviction or TTL).

Existing tenants get one minted here, so their prefix cache starts cold once
after this upgrade (a recompute, never a wrong answer). The column stays
nullable in the schema because making it NOT NULL on SQLite would mean
recreating ``tenants``, which other tables reference with ON DELETE CASCADE;
the application always sets it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

"""

import secrets
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("tenants", sa.Column("namespace_id", sa.String(length=32), nullable=True))
    tenants = sa.table("tenants", sa.column("id", sa.String), sa.column("namespace_id", sa.String))
    conn = op.get_bind()
    for (tenant_id,) in conn.execute(
        sa.select(tenants.c.id).where(tenants.c.namespace_id.is_(None))
    ).all():
        conn.execute(
            tenants.update()
            .where(tenants.c.id == tenant_id)
            .values(namespace_id=secrets.token_hex(16))
        )


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("namespace_id")
