"""Moving entries to new rows in one transaction (semantic/store_move.py), on SQLite and
PostgreSQL: exactly the old rows still present are carried, never over a row the new
partition holds, with their times and hits, and both sides are in the change log."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from semantic.changes import DELETE, UPSERT
from semantic.models import CacheChange
from semantic.store import EntryStore
from semantic.store_move import move_entries
from tests.semantic.test_store import T0, entry
from tests.semantic.test_store import store as store  # the fixture: SQLite and PostgreSQL

OLD, NEW = "o" * 64, "n" * 64


def _changes(store: EntryStore) -> list[tuple[str, str | None, int | None]]:
    with Session(store.engine) as s:
        rows = s.scalars(select(CacheChange).order_by(CacheChange.seq))
        return [(r.op, r.partition_key, r.entry_id) for r in rows]


def test_the_rows_still_there_move_and_the_rest_do_not(store: EntryStore) -> None:
    questions = ["How do I reset my password?", "Where is my card?", "How do I close it?"]
    olds = [store.upsert(entry(q, partition_key=OLD), now=T0)[0] for q in questions]
    store.upsert(entry(questions[0], partition_key=OLD), now=T0 + timedelta(minutes=1))
    store.record_hit(olds[0].id, at=T0 + timedelta(minutes=5))
    olds[0] = store.get(olds[0].id)
    fresher, _ = store.upsert(
        entry(questions[1], partition_key=NEW, embedder_id="new:4:x"), now=T0 + timedelta(hours=1)
    )
    store.delete([olds[2].id])  # an operator's delete before the move: not carried
    dropped, _ = store.upsert(entry("An expired one", partition_key=OLD), now=T0)
    before = len(_changes(store))
    carried = [
        (old, replace(entry(old.question), partition_key=NEW, embedder_id="new:4:x"))
        for old in olds
    ]
    moved = move_entries(store, carried, [dropped.id])

    assert (moved.kept, moved.dropped, moved.gone) == (1, 3, {olds[2].id})
    [written] = moved.written
    assert (written.partition_key, written.embedder_id, written.question) == (
        NEW,
        "new:4:x",
        questions[0],
    )
    # the answer is as old, and as used, as it was
    assert (written.created_at, written.updated_at, written.hit_count, written.last_hit_at) == (
        olds[0].created_at,
        olds[0].updated_at,
        olds[0].hit_count,
        olds[0].last_hit_at,
    )
    assert olds[0].hit_count == 1 and olds[0].created_at != olds[0].updated_at
    assert store.ids_in_partition(OLD) == set()
    assert store.ids_in_partition(NEW) == {written.id, fresher.id}
    assert store.get(fresher.id).updated_at == T0 + timedelta(hours=1)  # not overwritten
    log = _changes(store)[before:]
    deleted = [(DELETE, OLD, i) for i in (olds[0].id, olds[1].id, dropped.id)]
    assert sorted(log) == sorted([*deleted, (UPSERT, NEW, written.id)])


def test_nothing_moves_twice(store: EntryStore) -> None:
    old, _ = store.upsert(entry(partition_key=OLD), now=T0)
    carried = [(old, replace(entry(), partition_key=NEW, embedder_id="new:4:x"))]
    first = move_entries(store, carried)
    again = move_entries(store, carried)  # a second replica with the same batch
    assert (len(first.written), first.dropped) == (1, 1)
    assert (len(again.written), again.kept, again.dropped, again.gone) == (0, 0, 0, {old.id})
    assert len(store.ids_in_partition(NEW)) == 1
