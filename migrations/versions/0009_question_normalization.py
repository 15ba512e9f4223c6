"""semantic_entries: recompute the normalized question and its digest.

The store's identity of a question (``semantic.question.normalize_question``, the
unique key ``(partition_key, question_digest)``) used to fold more than an answer
allows: NFKC turned ``10⁵`` into ``105`` and ``2³`` into ``23``, case folding turned
``Maße`` into ``masse``, and a trailing ``!`` was dropped after a digit (``52!``, a
factorial). Storing one such question overwrote the entry of the other. The
normalization now keeps superscripts, subscripts and fractions, lowercases without
folding, and keeps a ``!`` after a digit; this migration recomputes both columns of
every row (paged by id), so existing rows keep matching their own question.

Both normalizations are frozen here, as they were at this revision. The new one is
finer than the old (two rows distinct before stay distinct), so the upgrade cannot
collide; a row whose new key is somehow taken is left as it was (a harmless
duplicate identity). The downgrade can collide (``Maße`` and ``Masse`` become one
key again): such a row keeps its new key.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03

"""

import hashlib
import re
import unicodedata
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PAGE = 5000
_WHITESPACE = re.compile(r"\s+")
_OLD_TRAILING = re.compile(r"[\s?!.。？！…]+$")
_TRAILING = frozenset(" ?!.。？！…")
_KEPT_FORMS = ("<super>", "<sub>", "<fraction>")


def old_normalize(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    collapsed = _WHITESPACE.sub(" ", folded).strip()
    return _OLD_TRAILING.sub("", collapsed) or collapsed


def new_normalize(text: str) -> str:
    out: list[str] = []
    start = 0
    for i, ch in enumerate(text):
        if unicodedata.decomposition(ch).startswith(_KEPT_FORMS):
            out += [unicodedata.normalize("NFKC", text[start:i]), ch]
            start = i + 1
    out.append(unicodedata.normalize("NFKC", text[start:]))
    collapsed = _WHITESPACE.sub(" ", "".join(out).lower()).strip()
    end = len(collapsed)
    while end > 0 and collapsed[end - 1] in _TRAILING:
        if collapsed[end - 1] in "!！" and end > 1 and collapsed[end - 2].isdigit():
            break
        end -= 1
    return collapsed[:end] or collapsed


def _renormalize(normalize: Callable[[str], str]) -> None:
    conn = op.get_bind()
    entries = sa.table(
        "semantic_entries",
        sa.column("id", sa.BigInteger),
        sa.column("partition_key", sa.String),
        sa.column("question", sa.Text),
        sa.column("normalized_question", sa.Text),
        sa.column("question_digest", sa.String),
    )
    last = 0
    while True:
        rows = conn.execute(
            sa.select(
                entries.c.id,
                entries.c.partition_key,
                entries.c.question,
                entries.c.question_digest,
            )
            .where(entries.c.id > last)
            .order_by(entries.c.id)
            .limit(PAGE)
        ).all()
        if not rows:
            return
        for entry_id, partition, question, digest in rows:
            normalized = normalize(question)
            new_digest = hashlib.sha256(normalized.encode("utf-8")).hexdigest()
            if new_digest == digest:
                continue
            taken = conn.execute(
                sa.select(entries.c.id)
                .where(entries.c.partition_key == partition)
                .where(entries.c.question_digest == new_digest)
            ).first()
            if taken is None:
                conn.execute(
                    entries.update()
                    .where(entries.c.id == entry_id)
                    .values(normalized_question=normalized, question_digest=new_digest)
                )
        last = rows[-1][0]


def upgrade() -> None:
    _renormalize(new_normalize)


def downgrade() -> None:
    _renormalize(old_normalize)
