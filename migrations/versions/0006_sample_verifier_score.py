"""misfire_samples.verifier_score: the pair verifier's score of a sampled hit.

With the verifier on the hit path (issue 12) a tenant's verifier cut is refined
from its labelled review samples (gateway/calibration.py): each sample needs the
score the verifier gave the served pair. Samples taken before this column, or
while the verifier was off, keep NULL and are left out of the refinement.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("misfire_samples", sa.Column("verifier_score", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("misfire_samples") as batch:
        batch.drop_column("verifier_score")
