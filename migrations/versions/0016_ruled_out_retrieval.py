"""verifier_ruled_out.retrieval: a floor is kept per retrieval its labels were read under.

Since session 47 a tenant's labels of hits below its retrieval threshold in force do not
count toward its verifier cut (gateway/calibration_labels.py): raising the threshold is
how a tenant removes misfires that came in just above the old one. The floors kept in
``verifier_ruled_out`` were keyed by tenant, target and score scale only, so a floor that
those misfires had set stayed in force after the raise, and the cut never came down
(session 47's note). The key now holds the retrieval too, ``"<threshold>@<embedder
id>"``; a floor applies only where every label it was computed from still counts
(gateway/calibration_ruled_out.py). Rows kept before this migration get ``"*"``, which
applies under every retrieval, as they did.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_KEY = ["tenant_id", "target", "scales"]


def upgrade() -> None:
    # batch: SQLite rebuilds the table to change its primary key (PostgreSQL alters it)
    with op.batch_alter_table("verifier_ruled_out") as batch:
        batch.add_column(
            sa.Column("retrieval", sa.String(length=255), nullable=False, server_default="*")
        )
        batch.drop_constraint("pk_verifier_ruled_out", type_="primary")
        batch.create_primary_key("pk_verifier_ruled_out", [*_OLD_KEY, "retrieval"])


def downgrade() -> None:
    # Several retrievals' floors of one key become one row: the highest, the strictest.
    op.execute(
        "DELETE FROM verifier_ruled_out WHERE EXISTS (SELECT 1 FROM verifier_ruled_out o"
        " WHERE o.tenant_id = verifier_ruled_out.tenant_id"
        " AND o.target = verifier_ruled_out.target AND o.scales = verifier_ruled_out.scales"
        " AND (o.band_cut > verifier_ruled_out.band_cut OR (o.band_cut ="
        " verifier_ruled_out.band_cut AND o.retrieval < verifier_ruled_out.retrieval)))"
    )
    with op.batch_alter_table("verifier_ruled_out") as batch:
        batch.drop_constraint("pk_verifier_ruled_out", type_="primary")
        batch.create_primary_key("pk_verifier_ruled_out", _OLD_KEY)
        batch.drop_column("retrieval")
