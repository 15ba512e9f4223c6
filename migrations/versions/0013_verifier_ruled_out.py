"""verifier_ruled_out: the verifier cut below which a tenant's labels ruled ranges out.

A tenant's verifier cut rises above every score range its labelled samples disprove
(gateway/calibration.py). Labels that arrived later *below* such a range (samples taken
before the raise, labelled after it) shifted the bands the ranges are tested in, and a
replica that had not kept the cut in memory (a restart, another replica) served the
range again. One row per tenant, target and score scale that ever had a range ruled
out; the table starts empty, and the first refresh after the upgrade writes what the
labels give.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "verifier_ruled_out",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("target", sa.Float(), nullable=False),
        sa.Column("scales", sa.String(length=255), nullable=False),
        sa.Column("band_cut", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "target", "scales", name=op.f("pk_verifier_ruled_out")
        ),
    )


def downgrade() -> None:
    op.drop_table("verifier_ruled_out")
