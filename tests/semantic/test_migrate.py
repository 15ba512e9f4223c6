"""Carrying partitions over from an earlier embedder on their first lookup
(semantic/migrate.py): real MiniLM and e5, real SQLite. Each negative has its positive
control: the asked tenant's partition moves and hits, another tenant's stays where it
was and does not."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.migrate import Migrated, PartitionMigrator
from semantic.policy import SemanticPolicy
from semantic.store import EntryStore
from tests.semantic.helpers import ManualClock, chat, reply

QUESTIONS = [
    "How do I reset my password?",
    "What are your opening hours?",
    "How do I get an invoice?",
]


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(progress=False)


class _Hooked:
    """``inner``, calling ``before()`` each time it is asked to embed."""

    def __init__(self, inner: Embedder, before: Callable[[], object]) -> None:
        self.inner, self.before = inner, before
        self.embedder_id, self.dim = inner.embedder_id, inner.dim

    def coverage(self, text: str) -> float:
        return self.inner.coverage(text)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.before()
        return self.inner.embed(texts)


def _switched(
    url: str, clock: ManualClock, before: Embedder, after: Embedder
) -> tuple[SemanticCache, SemanticCache, PartitionMigrator]:
    """One answer stored under ``before``, then the cache under ``after`` and its
    migrator: (the old cache, the new one, the migrator)."""
    old = SemanticCache(before, EntryStore(url), clock=clock)
    assert old.store(chat(QUESTIONS[0]), reply()).stored
    new = SemanticCache(after, EntryStore(url), clock=clock)
    return old, new, PartitionMigrator.for_store(new)


def _carry(migrator: PartitionMigrator, cache: SemanticCache, question: str, **kw: object):
    query = chat(question, **kw)  # type: ignore[arg-type]
    return migrator.touch(query, cache.partition_key(query))


def test_a_partition_moves_to_the_new_embedder_when_its_tenant_asks(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, e5: E5Embedder
) -> None:
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    short = SemanticPolicy(ttl_seconds=60)
    for i, question in enumerate(QUESTIONS):
        assert old.store(chat(question), reply(f"answer {i}")).stored
    assert old.store(chat("Do you ship abroad?"), reply("yes"), short).stored
    assert old.store(chat("How do I reset my password?", tenant="tenant-b"), reply("b")).stored
    new = SemanticCache(e5, EntryStore(sqlite_url), clock=clock)
    assert new.rebuild(progress=False) == 0  # nothing of e5's yet: the old rows are unsearched
    clock.advance(120)  # the short-lived entry expires (after the rebuild, which purges)
    migrator = PartitionMigrator.for_store(new)
    assert migrator.sources == (embedder.embedder_id,)
    assert not new.lookup(chat("How can I reset my password?")).hit

    scheduled = _carry(migrator, new, "How can I reset my password?")
    assert scheduled is not None
    [done] = scheduled.result(timeout=60)
    assert done == Migrated(embedder.embedder_id, written=3, expired=1, dropped=4)

    # positive control: the asking tenant's partition hits, with its own answer
    hit = new.lookup(chat("How can I reset my password?"))
    assert hit.hit and hit.answer is not None
    assert hit.answer["choices"][0]["message"]["content"] == "answer 0"
    # every row the index holds is e5's: the two embedders' vectors never meet
    for key in new.index.partitions():
        index = new.index.get(key)
        assert index is not None
        rows = new.entries.get_many(index.ids())
        assert {row.embedder_id for row in rows.values()} == {e5.embedder_id}
    # negative: tenant-b was not asked for, so its entry stays the old embedder's
    assert not new.lookup(chat("How can I reset my password?", tenant="tenant-b")).hit
    assert new.entries.count(embedder_id=embedder.embedder_id) == 1
    # a partition is carried once per process; the next ask costs nothing
    assert _carry(migrator, new, "What are your opening hours?") is None
    # tenant-b's turn: now it moves, and hits its own answer, not tenant-a's
    later = _carry(migrator, new, "Reset password", tenant="tenant-b")
    assert later is not None and later.result(timeout=60)[0].written == 1
    b_hit = new.lookup(chat("How can I reset my password?", tenant="tenant-b"))
    assert b_hit.hit and b_hit.answer is not None
    assert b_hit.answer["choices"][0]["message"]["content"] == "b"
    assert new.entries.partitions_by_embedder(clock(), e5.embedder_id) == {}
    assert new.entries.count(embedder_id=e5.embedder_id) == 4
    assert not migrator.is_active  # every partition carried: lookups pay nothing now
    migrator.close()


def test_a_fresher_answer_under_the_new_embedder_is_kept(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, other_embedder: Embedder
) -> None:
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    for question in QUESTIONS:
        assert old.store(chat(question), reply("old answer")).stored
    new = SemanticCache(other_embedder, EntryStore(sqlite_url), clock=clock)
    # a backfill under the new embedder won the race for one question
    assert new.store(chat(QUESTIONS[1]), reply("fresh answer")).stored
    migrator = PartitionMigrator.for_store(new)
    scheduled = _carry(migrator, new, QUESTIONS[0])
    assert scheduled is not None
    [done] = scheduled.result(timeout=60)
    assert (done.written, done.kept, done.dropped) == (2, 1, 3)
    hit = new.lookup(chat(QUESTIONS[1]))
    assert hit.hit and hit.answer is not None
    assert hit.answer["choices"][0]["message"]["content"] == "fresh answer"
    assert new.lookup(chat(QUESTIONS[2])).hit  # positive control: a carried entry
    migrator.close()


def test_questions_the_new_embedder_cannot_read_are_dropped(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, e5: E5Embedder
) -> None:
    old = SemanticCache(e5, EntryStore(sqlite_url), clock=clock)
    assert old.store(chat("如何开具发票"), reply("发票")).stored
    assert old.store(chat(QUESTIONS[2]), reply("invoice")).stored
    new = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    migrator = PartitionMigrator.for_store(new)
    scheduled = _carry(migrator, new, QUESTIONS[2])
    assert scheduled is not None
    [done] = scheduled.result(timeout=60)
    assert (done.written, done.unsupported, done.dropped) == (1, 1, 2)
    assert new.lookup(chat(QUESTIONS[2])).hit
    assert not new.lookup(chat("如何开具发票")).hit
    migrator.close()


def test_a_tenant_deleted_meanwhile_gets_nothing_written(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, other_embedder: Embedder
) -> None:
    old, new, migrator = _switched(sqlite_url, clock, embedder, other_embedder)
    query = chat(QUESTIONS[0])
    gone = migrator.touch(query, new.partition_key(query), still_wanted=lambda: False)
    assert gone is not None and gone.result(timeout=60) == []
    assert not migrator.is_active  # a deleted tenant's partition is not waited for
    assert new.entries.count(embedder_id=other_embedder.embedder_id) == 0
    assert len(new.index) == 0
    # deleted while the batch was written (another replica's delete): removed again
    answers = iter([True, False])
    racing = PartitionMigrator.for_store(new)
    raced = racing.touch(query, new.partition_key(query), still_wanted=lambda: next(answers))
    assert raced is not None and raced.result(timeout=60) == []
    assert new.entries.count(embedder_id=other_embedder.embedder_id) == 0
    assert len(new.index) == 0
    # positive control: the same partition, wanted, under a fresh migrator is carried
    assert old.store(chat(QUESTIONS[0]), reply()).stored
    again = PartitionMigrator.for_store(new)
    kept = again.touch(query, new.partition_key(query), still_wanted=lambda: True)
    assert kept is not None and kept.result(timeout=60)[0].written == 1
    assert new.lookup(query).hit
    for m in (migrator, racing, again):
        m.close()


def test_a_store_outage_keeps_the_old_rows_and_tries_again(
    tmp_path, sqlite_url: str, clock: ManualClock, embedder: Embedder, other_embedder: Embedder
) -> None:
    old, new, migrator = _switched(sqlite_url, clock, embedder, other_embedder)
    db = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as conn:  # the schema vanishes: the store reports it away
        conn.execute("ALTER TABLE semantic_entries RENAME TO away")
    failed = _carry(migrator, new, QUESTIONS[0])
    assert failed is not None and failed.result(timeout=60) == []
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE away RENAME TO semantic_entries")
    assert old.entries.count(embedder_id=embedder.embedder_id) == 1  # nothing was lost
    retried = _carry(migrator, new, QUESTIONS[0])  # forgotten, so tried again
    assert retried is not None and retried.result(timeout=60)[0].written == 1
    assert new.lookup(chat(QUESTIONS[0])).hit
    migrator.close()


def test_no_earlier_embedder_means_nothing_to_do(
    sqlite_url: str, clock: ManualClock, embedder: Embedder
) -> None:
    cache = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    assert cache.store(chat(QUESTIONS[0]), reply()).stored
    migrator = PartitionMigrator.for_store(cache)
    assert not migrator.is_active
    assert _carry(migrator, cache, QUESTIONS[0]) is None
    migrator.close()


def test_the_answer_is_as_old_as_it_was(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, other_embedder: Embedder
) -> None:
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    assert old.store(chat(QUESTIONS[0]), reply(), SemanticPolicy(ttl_seconds=600)).stored
    assert old.lookup(chat(QUESTIONS[0])).hit
    old.close()  # the batched hit count is written
    [before] = old.entries.iter_entries()
    new = SemanticCache(other_embedder, EntryStore(sqlite_url), clock=clock)
    migrator = PartitionMigrator.for_store(new)
    clock.advance(300)
    scheduled = _carry(migrator, new, QUESTIONS[0])
    assert scheduled is not None and scheduled.result(timeout=60)[0].written == 1
    [after] = new.entries.iter_entries()
    assert after.embedder_id == other_embedder.embedder_id
    # not fresh: its expiry, times and hits are the old row's
    assert (after.expires_at, after.created_at, after.updated_at) == (
        before.expires_at,
        before.created_at,
        before.updated_at,
    )
    assert (
        (after.hit_count, after.last_hit_at)
        == (before.hit_count, before.last_hit_at)
        == (
            1,
            before.last_hit_at,
        )
    )
    # a client asking for an answer at most a minute old is not served this 5-minute one
    assert not new.lookup(chat(QUESTIONS[0]), SemanticPolicy(max_age_seconds=60)).hit
    assert new.lookup(chat(QUESTIONS[0]), SemanticPolicy(max_age_seconds=600)).hit  # control
    clock.advance(301)
    assert not new.lookup(chat(QUESTIONS[0])).hit  # expired when it would have
    migrator.close()


def test_an_entry_deleted_while_its_batch_is_embedded_is_not_written_again(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, other_embedder: Embedder
) -> None:
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    for i, question in enumerate(QUESTIONS):
        assert old.store(chat(question), reply(f"answer {i}")).stored
    wrong = next(e for e in old.entries.iter_entries() if e.question == QUESTIONS[1])
    new = SemanticCache(other_embedder, EntryStore(sqlite_url), clock=clock)
    migrator = PartitionMigrator.for_store(new)

    # an operator's delete lands while the new embedder embeds the batch
    new.embedder = _Hooked(other_embedder, lambda: old.invalidate(entry_id=wrong.id))
    scheduled = _carry(migrator, new, QUESTIONS[0])
    assert scheduled is not None
    [done] = scheduled.result(timeout=60)
    assert (done.written, done.gone) == (2, 1)
    new.embedder = other_embedder
    assert not new.lookup(chat(QUESTIONS[1])).hit  # the deleted answer stays deleted
    assert new.lookup(chat(QUESTIONS[2])).hit  # control: its neighbours moved
    migrator.close()


def test_a_question_too_long_for_the_new_embedder_is_left_out_alone(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, e5: E5Embedder
) -> None:
    old = SemanticCache(e5, EntryStore(sqlite_url), clock=clock)
    long = "Please explain " + " ".join(f"step{i} of the refund process" for i in range(50))
    assert old.store(chat(long), reply("long")).stored  # e5 reads 512 tokens, MiniLM 256
    assert old.store(chat(QUESTIONS[2]), reply("invoice")).stored
    new = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    migrator = PartitionMigrator.for_store(new)
    scheduled = _carry(migrator, new, QUESTIONS[2])
    assert scheduled is not None
    [done] = scheduled.result(timeout=60)
    assert (done.written, done.unsupported, done.dropped) == (1, 1, 2)
    assert new.lookup(chat(QUESTIONS[2])).hit
    migrator.close()


def test_a_lookup_pays_nothing_for_partitions_no_earlier_embedder_left(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, other_embedder: Embedder
) -> None:
    _, new, migrator = _switched(sqlite_url, clock, embedder, other_embedder)
    assert migrator.is_active
    # another tenant's partition was never the earlier embedder's: nothing scheduled
    assert _carry(migrator, new, QUESTIONS[0], tenant="tenant-z") is None
    assert _carry(migrator, new, QUESTIONS[0]) is not None  # control: tenant-a's was
    migrator.close()


def test_the_partitions_left_are_read_again(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, other_embedder: Embedder
) -> None:
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    assert old.store(chat(QUESTIONS[0]), reply(), SemanticPolicy(ttl_seconds=60)).stored
    new = SemanticCache(other_embedder, EntryStore(sqlite_url), clock=clock)
    migrator = PartitionMigrator.for_store(new)
    assert migrator.is_active
    # An old replica (a rolling upgrade) writes another tenant's partition after start,
    # and the first one's rows expire: a re-read brings the one and drops the other.
    assert old.store(chat(QUESTIONS[1], tenant="tenant-c"), reply("c")).stored
    clock.advance(120)
    assert _carry(migrator, new, QUESTIONS[1], tenant="tenant-c") is None  # not known yet
    migrator._refresh_at = 0.0  # the re-read is due (every REFRESH_SECONDS)
    assert _carry(migrator, new, QUESTIONS[0], tenant="tenant-z") is None  # starts it
    migrator._pool.submit(lambda: None).result(timeout=60)  # the re-read has run
    assert _carry(migrator, new, QUESTIONS[0]) is None  # expired: nothing to carry
    assert migrator.sources == (embedder.embedder_id,)
    scheduled = _carry(migrator, new, QUESTIONS[1], tenant="tenant-c")
    assert scheduled is not None and scheduled.result(timeout=60)[0].written == 1
    assert new.lookup(chat(QUESTIONS[1], tenant="tenant-c")).hit
    assert not migrator.is_active  # nothing left: lookups pay nothing again
    migrator.close()


def test_close_stops_between_batches_and_leaves_the_rest(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, other_embedder: Embedder
) -> None:
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    questions = [f"What is the status of shipment number {i}?" for i in range(100)]
    for question in questions:
        assert old.store(chat(question), reply()).stored
    new = SemanticCache(other_embedder, EntryStore(sqlite_url), clock=clock)
    migrator = PartitionMigrator.for_store(new)
    started = threading.Event()
    release = threading.Event()

    def hold() -> None:  # inside the first batch until the test lets it go
        started.set()
        release.wait(60)

    new.embedder = _Hooked(other_embedder, hold)
    scheduled = _carry(migrator, new, questions[0])
    assert scheduled is not None and started.wait(60)
    closing = threading.Thread(target=migrator.close)
    closing.start()
    release.set()
    closing.join(60)
    assert scheduled.result(timeout=60) == []
    # the batch in hand (64 rows) moved whole; the other 36 wait for the next start
    assert new.entries.count(embedder_id=other_embedder.embedder_id) == 64
    assert new.entries.count(embedder_id=embedder.embedder_id) == 36
    assert _carry(migrator, new, questions[0]) is None  # closed: nothing more


def test_an_invalidation_racing_a_batch_move_keeps_nothing_it_meant_to_remove(
    sqlite_url: str,
    clock: ManualClock,
    embedder: Embedder,
    other_embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An invalidation on another replica whose delete ran while a batch's move was
    uncommitted saw none of its new rows, and skipped the old ones the move deleted:
    the answers it meant to remove came back under the new embedder (a review, session
    41). The move now reads the fence after its commit and deletes what it wrote."""
    import semantic.migrate_partition as migrate_partition

    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    for i, question in enumerate(QUESTIONS):
        assert old.store(chat(question), reply(f"answer {i}")).stored
        assert old.store(chat(question, tenant="tenant-b"), reply(f"b {i}")).stored
    new = SemanticCache(other_embedder, EntryStore(sqlite_url), clock=clock)
    migrator = PartitionMigrator.for_store(new)
    real_move = migrate_partition.move_entries

    def invalidated_meanwhile(entries: EntryStore, *args: object, **kw: object) -> object:
        if any(e.tenant == "tenant-a" for e, _ in args[0]):  # type: ignore[attr-defined]
            new.fence("tenant-a")  # its delete then found nothing it could see
        return real_move(entries, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(migrate_partition, "move_entries", invalidated_meanwhile)
    scheduled = _carry(migrator, new, QUESTIONS[0])
    assert scheduled is not None
    [done] = scheduled.result(timeout=60)
    assert (done.written, done.gone) == (0, 3)
    assert new.entries.count(tenant="tenant-a") == 0
    assert not new.lookup(chat(QUESTIONS[0])).hit
    # the control: tenant-b, not invalidated, moves whole and hits its own answer
    later = _carry(migrator, new, QUESTIONS[0], tenant="tenant-b")
    assert later is not None and later.result(timeout=60)[0].written == 3
    hit = new.lookup(chat(QUESTIONS[0], tenant="tenant-b"))
    assert hit.hit and hit.answer is not None
    assert hit.answer["choices"][0]["message"]["content"] == "b 0"
    migrator.close()
