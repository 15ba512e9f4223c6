"""verifier_ruled_out.evidence: a floor is kept with the misfires it rests on.

Since session 47 a tenant's labels of hits below its retrieval threshold in force do not
count toward its verifier cut (gateway/calibration_labels.py): raising the threshold is
how a tenant removes misfires that came in just above the old one. The floors kept in
``verifier_ruled_out`` were keyed by tenant, target and score scale only, so a floor that
those misfires had set stayed in force after the raise, and the cut never came down
(session 47's note). The key now holds the floor's evidence too, ``"<similarity>@<embedder
id>"``: the lowest similarity among its misfires that the embedder in force scored; a
floor holds while every one of them still counts (gateway/calibration_ruled_out.py).
Rows kept before this migration get ``"*"``, which holds under every retrieval, as they
did.

This changes the table's primary key. A gateway of an earlier session still running
reads every row as before (the highest floor of any evidence: cuts stay as high or
higher), but its save of a floor can fail where two rows share its old key (kept in its
memory, logged) or raise a row of another evidence: stop the old gateways, or finish
the rolling restart before relying on the floors.

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
            sa.Column("evidence", sa.String(length=255), nullable=False, server_default="*")
        )
        batch.drop_constraint("pk_verifier_ruled_out", type_="primary")
        batch.create_primary_key("pk_verifier_ruled_out", [*_OLD_KEY, "evidence"])


def downgrade() -> None:
    # Several floors of one old key become one row: the highest, the strictest.
    op.execute(
        "DELETE FROM verifier_ruled_out WHERE EXISTS (SELECT 1 FROM verifier_ruled_out o"
        " WHERE o.tenant_id = verifier_ruled_out.tenant_id"
        " AND o.target = verifier_ruled_out.target AND o.scales = verifier_ruled_out.scales"
        " AND (o.band_cut > verifier_ruled_out.band_cut OR (o.band_cut ="
        " verifier_ruled_out.band_cut AND o.evidence < verifier_ruled_out.evidence)))"
    )
    with op.batch_alter_table("verifier_ruled_out") as batch:
        batch.drop_constraint("pk_verifier_ruled_out", type_="primary")
        batch.create_primary_key("pk_verifier_ruled_out", _OLD_KEY)
        batch.drop_column("evidence")
