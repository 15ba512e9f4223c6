"""misfire_samples.verifier_model: which verifier scored a sampled hit.

A tenant's verifier cut is refined from the scores of its labelled samples
(gateway/calibration.py). Those scores mean something only on the scale of the
verifier that gave them: after the shipped weights change (a retrained English or
Chinese cross-encoder), a label at score 0.98 says nothing about what 0.98 means
now. Each sample records the verifier's identity (``GatewayVerifier.scale_id``:
its English and Chinese weights; since session 35 the id of the one language's
model that scored it, ``GatewayVerifier.scale_id_of``, the same column), and the
refinement reads only the samples of the verifier in force. Samples taken before
this column keep NULL and are left out of the refinement (the shipped cut applies
until new labels arrive).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "misfire_samples", sa.Column("verifier_model", sa.String(length=32), nullable=True)
    )


def downgrade() -> None:
    with op.batch_alter_table("misfire_samples") as batch:
        batch.drop_column("verifier_model")
