"""Moving entries to new rows in one transaction: how a partition changes embedder.

:mod:`semantic.migrate` re-embeds an earlier embedder's entries and writes them under
the partition key of the current one. Done as separate deletes and upserts, that has
three races: an entry an operator deletes while its batch is embedded would be written
again (a wrong answer served once more); a fresher answer another replica backfills
between a check and a write would be overwritten by the older one; and the tenant would
hold both copies for a while, so its bounds could evict other entries to make room.
:func:`move_entries` closes all three: in one transaction it deletes the old rows and
inserts new rows for exactly those the delete found (an id deleted meanwhile is not
carried), never over a row the new partition already holds for that question, and logs
both for the other replicas. A new row keeps its old row's times and hit count: the
answer is as old, and as used, as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy import exc as sa_exc

from semantic.changes import DELETE, UPSERT, NewChange, log_changes
from semantic.entries import NewEntry, StoredEntry, to_entry
from semantic.models import SemanticEntry
from semantic.question import normalize_question, question_digest
from semantic.store import EntryStore
from semantic.store_db import is_deadlock, unavailable_on_db_errors


@dataclass(frozen=True)
class Moved:
    """What one :func:`move_entries` did."""

    written: list[StoredEntry] = field(default_factory=list)  # the new rows
    kept: int = 0  # the new partition already held the question: its row stays
    dropped: int = 0  # old rows deleted (carried or not)
    gone: frozenset[int] = frozenset()  # old ids deleted by someone else meanwhile


#: What the delete returns of each old row: a new row is built from the row as it was
#: deleted, not as it was read before its question was embedded (an old replica may
#: have updated its answer meanwhile).
_RETURNED = (
    SemanticEntry.id,
    SemanticEntry.partition_key,
    SemanticEntry.answer,
    SemanticEntry.entities,
    SemanticEntry.expires_at,
    SemanticEntry.ttl_seconds,
    SemanticEntry.created_at,
    SemanticEntry.updated_at,
    SemanticEntry.hit_count,
    SemanticEntry.last_hit_at,
)


def move_entries(
    store: EntryStore,
    carried: Sequence[tuple[StoredEntry, NewEntry]],
    dropped: Sequence[int] = (),
) -> Moved:
    """Delete the old rows of ``carried`` (and the ids in ``dropped``) and insert each
    carried entry's new row (its key, embedder and vector from the ``NewEntry``; its
    answer, entities, expiry, times and hits from the old row as deleted), in one
    transaction; see the module docstring. A concurrent insert of the same question
    elsewhere loses nothing: the transaction is rolled back and run once more, when the
    check finds that row."""
    old_ids = [old.id for old, _ in carried] + [int(i) for i in dropped]
    with unavailable_on_db_errors(store.url):
        for attempt in range(3):  # a unique race, a deadlock's loss, then its race
            try:
                return _move(store, carried, old_ids)
            except sa_exc.IntegrityError:
                if attempt == 2:
                    raise
            except sa_exc.OperationalError as exc:  # a deadlock's loser: run again
                if attempt == 2 or not is_deadlock(exc):
                    raise
    raise AssertionError("unreachable")  # pragma: no cover


def _move(
    store: EntryStore, carried: Sequence[tuple[StoredEntry, NewEntry]], old_ids: list[int]
) -> Moved:
    written: list[StoredEntry] = []
    kept = 0
    with store._session() as session, session.begin():
        result = session.execute(
            delete(SemanticEntry).where(SemanticEntry.id.in_(old_ids)).returning(*_RETURNED)
        )
        removed = {int(row.id): row for row in result}
        changes = [NewChange(DELETE, str(row.partition_key), i) for i, row in removed.items()]
        rows: list[tuple[SemanticEntry, NewEntry]] = []
        adding: set[tuple[str, str]] = set()
        for old, new in carried:
            was = removed.get(old.id)
            if was is None:
                continue  # deleted meanwhile (an operator, a purge, a bound): not carried
            normalized = normalize_question(new.question)
            digest = question_digest(normalized)
            with session.no_autoflush:  # the new rows go in one statement, below
                present = session.scalar(
                    select(SemanticEntry.id).where(
                        SemanticEntry.partition_key == new.partition_key,
                        SemanticEntry.question_digest == digest,
                    )
                )
            if present is not None or (new.partition_key, digest) in adding:
                kept += 1  # a backfill under the new embedder got there first: fresher
                continue
            adding.add((new.partition_key, digest))
            row = SemanticEntry(
                partition_key=new.partition_key,
                question_digest=digest,
                tenant=new.tenant,
                question=new.question,
                normalized_question=normalized,
                answer=was.answer,
                embedding=np.ascontiguousarray(new.embedding, dtype="<f4").tobytes(),
                embedder_id=new.embedder_id,
                entities=was.entities,
                expires_at=was.expires_at,
                ttl_seconds=was.ttl_seconds,
                created_at=was.created_at,
                updated_at=was.updated_at,
                hit_count=was.hit_count,
                last_hit_at=was.last_hit_at,
            )
            session.add(row)
            rows.append((row, new))
        # One INSERT for the batch: the partition count's trigger then runs once all of
        # its rows are in, instead of holding the count row while a later row waits on a
        # backfill of the same question (which waits on that row: a deadlock).
        session.flush()
        for row, new in rows:
            changes.append(NewChange(UPSERT, new.partition_key, row.id, new.tenant))
            written.append(to_entry(row))
        log_changes(session, changes)
    store.memo.forget([*removed, *(e.id for e in written)])  # after the commit
    gone = frozenset(old_ids) - frozenset(removed)
    return Moved(written, kept, len(removed), gone)
