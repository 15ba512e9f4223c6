"""misfire_samples.embedder_id: which embedder scored a sampled hit.

A sample's ``score`` is the retrieval similarity on the scale of the embedder that
served it: MiniLM's cosine, e5's, or the routed scale of ``CACHEGATE_EMBEDDER=auto``
(semantic/embedder_routed.py). The misfire report turns labelled scores into a
recommended threshold (gateway/reports/sections.py); samples of two embedders in one
window would mix two scales, and a MiniLM cosine of 0.86 read as a routed score
recommends a MiniLM setting of 0.55. Each sample now records the embedder id, and the
report's score sections read only the samples of the embedder in force. Samples taken
before this column keep NULL: their scale is unknown, so they count in the misfire
rate but not in the score sections.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("misfire_samples", sa.Column("embedder_id", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("misfire_samples") as batch:
        batch.drop_column("embedder_id")
