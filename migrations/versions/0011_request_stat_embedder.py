"""request_stats.embedder_id: which embedder's scale a recorded lookup score is on.

A request's ``score`` is the retrieval similarity of its semantic lookup, on the scale
of the embedder in force: MiniLM's cosine, e5's, or the routed scale of
``CACHEGATE_EMBEDDER=auto`` (semantic/embedder_routed.py). The misfire report draws the
scores of every served hit (``hit_scores``, gateway/reports/sections.py) beside the
labelled samples' scores, which since 0010 are those of the embedder in force only; a
window spanning a switch of embedder would draw a MiniLM cosine of 0.86 at 0.86 on the
routed scale, where the same pair reads 0.956. Each row of a request that ran a lookup
now records the embedder id, and the histogram draws only the hits of the embedder in
force, saying how many it left out. Rows written before this column keep NULL: their
scale is unknown, so they count in the hit rates but are not drawn. Requests that ran
no lookup leave it NULL too.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("request_stats", sa.Column("embedder_id", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("request_stats") as batch:
        batch.drop_column("embedder_id")
