"""Two writers into one partition on PostgreSQL since the partition counts' triggers
(migration 0015). A transaction that inserts into a partition in two statements holds
the partition's count row from the first; a backfill of a question its second statement
inserts then waits on that row while the second statement waits on the backfill's new
row, and PostgreSQL ends one of them (a review reproduced it: the backfill was lost).
Now a backfill that loses a deadlock runs again, and an embedder carry-over inserts its
batch in one statement, so it takes the count row only once all its rows are in."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import Engine, create_engine, event, text

from migrations.runner import upgrade_database
from semantic.entries import NewEntry
from semantic.store import EntryStore
from semantic.store_move import move_entries

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
RAW_INSERT = text(
    "INSERT INTO semantic_entries (partition_key, tenant, question, normalized_question,"
    " question_digest, answer, embedding, embedder_id, created_at, updated_at, hit_count)"
    " VALUES ('pn', 'a', :q, :q, :d, '{}', '\\x00', 'emb', now(), now(), 0)"
)


def entry(partition: str, question: str, embedder: str = "emb") -> NewEntry:
    vector = np.full(4, 0.5, dtype=np.float32)
    return NewEntry(partition, "a", question, {"a": question}, vector, embedder)


def test_a_backfill_that_loses_a_deadlock_is_run_again(pg_bare_url: str) -> None:
    upgrade_database(pg_bare_url)
    store = EntryStore(pg_bare_url)
    engine = create_engine(pg_bare_url)
    backfilled: list[object] = []
    other = engine.connect()
    held = other.begin()
    other.execute(RAW_INSERT, {"q": "first", "d": "first"})  # holds the count row of pn
    digest = store_digest("same question")

    def backfill() -> None:
        try:
            backfilled.append(store.upsert(entry("pn", "same question"), now=NOW))
        except Exception as exc:  # what the review saw: the backfill lost
            backfilled.append(exc)

    thread = threading.Thread(target=backfill)
    thread.start()
    time.sleep(0.5)  # the backfill's row is in, its trigger waits on the count row
    try:
        other.execute(RAW_INSERT, {"q": "same question", "d": digest})  # waits on it
        held.commit()
        other_outcome = "committed"
    except Exception as exc:
        held.rollback()
        other_outcome = type(exc).__name__
    other.close()
    thread.join(timeout=30)
    assert len(backfilled) == 1 and not isinstance(backfilled[0], Exception), backfilled
    # one of the two holds the question; the counts agree with the rows either way
    truth = store.partition_sizes("a")
    assert store.tenant_size("a", "pn").entries == truth["pn"][0]
    assert other_outcome in ("committed", "IntegrityError", "OperationalError")
    engine.dispose()
    store.close()


def store_digest(question: str) -> str:
    from semantic.question import normalize_question, question_digest

    return question_digest(normalize_question(question))


def test_a_carry_over_inserts_its_batch_in_one_statement(pg_bare_url: str) -> None:
    upgrade_database(pg_bare_url)
    store = EntryStore(pg_bare_url)
    old = [store.upsert(entry("old", f"question {i}", "old-emb"), now=NOW)[0] for i in range(3)]
    inserts: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO SEMANTIC_ENTRIES"):
            inserts.append(statement)

    event.listen(store.engine, "before_cursor_execute", seen)
    moved = move_entries(store, [(o, entry("new", o.question, "new-emb")) for o in old])
    event.remove(store.engine, "before_cursor_execute", seen)
    assert len(moved.written) == 3 and moved.dropped == 3
    assert len(inserts) == 1  # the trigger then runs once, after all three rows
    assert store.tenant_size("a", "new").entries == 3
    assert store.tenant_size("a", "old").partitions == 1  # only "new" is left
    store.close()


def waits_on_a_lock(engine: Engine, timeout: float = 10.0) -> bool:
    """Whether another session of this database waits on a lock within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            waiting = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
            ).scalar()
        if waiting:
            return True
        time.sleep(0.05)
    return False


def test_a_backfill_updating_a_row_another_replica_deletes_stores_it_anew(
    pg_bare_url: str,
) -> None:
    """Replica A invalidates an entry while replica B's backfill re-stores the same
    question: B read the row, its update then matched none, and the ORM raised
    StaleDataError, an ``error:internal`` backfill with the fresh answer lost (a review,
    session 44). Now the upsert runs again and inserts it."""
    upgrade_database(pg_bare_url)
    store = EntryStore(pg_bare_url)
    engine = create_engine(pg_bare_url)
    old, _ = store.upsert(entry("pu", "opening hours"), now=NOW)
    result: list[object] = []
    deleting = engine.connect()
    held = deleting.begin()
    deleting.execute(text("DELETE FROM semantic_entries WHERE id = :i"), {"i": old.id})

    def backfill() -> None:
        try:
            fresh = NewEntry("pu", "a", "opening hours", {"a": "fresh"}, old.embedding, "emb")
            result.append(store.upsert(fresh, now=NOW))
        except Exception as exc:
            result.append(exc)

    thread = threading.Thread(target=backfill)
    thread.start()
    try:
        assert waits_on_a_lock(engine)  # B read the row and waits on its lock
        held.commit()
    finally:
        deleting.close()
        thread.join(30)
    try:
        assert len(result) == 1 and isinstance(result[0], tuple), result
        stored, created = result[0]
        assert created and stored.id != old.id and stored.answer == {"a": "fresh"}
        assert store.get(stored.id).answer == {"a": "fresh"}
    finally:
        store.close()
        engine.dispose()
