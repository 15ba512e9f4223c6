"""Invalidation fences (semantic/fences.py): an answer to a question asked before its
tenant's cache was invalidated is not kept; one asked after is; another tenant's fence
changes nothing. Real embedder, real migrated SQLite and PostgreSQL, the manual clock.

Through a live gateway with the invalidation landing inside a request:
tests/gateway/admin/test_invalidation_race.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import text

from semantic.cache import SemanticCache
from semantic.changes import UPSERT, Change
from semantic.embedder import Embedder
from semantic.errors import StoreUnavailableError
from semantic.fences import FENCE_MARGIN, is_fenced, raise_fence
from semantic.replay import replay
from semantic.store import EntryStore
from tests.semantic.helpers import PARAPHRASE, STORED, ManualClock, chat, reply

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def backend_store(request: pytest.FixtureRequest) -> Iterator[EntryStore]:
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    store = EntryStore(str(request.getfixturevalue(name)))
    yield store
    store.close()


@pytest.fixture
def cache(
    embedder: Embedder, backend_store: EntryStore, clock: ManualClock
) -> Iterator[SemanticCache]:
    semantic = SemanticCache(embedder, backend_store, clock=clock, hit_flush_seconds=None)
    yield semantic
    semantic.close()


def deletes_logged(store: EntryStore, entry_id: int) -> int:
    with store.engine.connect() as conn:
        found = conn.execute(
            text("SELECT count(*) FROM cache_changes WHERE op = 'delete' AND entry_id = :i"),
            {"i": entry_id},
        )
        return int(found.scalar_one())


def test_an_answer_asked_before_the_fence_is_not_kept(
    cache: SemanticCache, clock: ManualClock
) -> None:
    asked_at = clock()
    clock.advance(30)  # the model takes its time; the operator invalidates meanwhile
    cache.fence("tenant-a")
    clock.advance(1)
    result = cache.store(chat(STORED), reply(), asked_at=asked_at)
    assert not result.stored and result.reason == "invalidated"
    assert cache.entries.count(tenant="tenant-a") == 0
    assert len(cache.index) == 0
    assert not cache.lookup(chat(PARAPHRASE)).hit
    # Another replica may have read the row from the change feed: its delete is logged.
    with cache.entries.engine.connect() as conn:
        ids = conn.execute(text("SELECT entry_id FROM cache_changes WHERE op = 'upsert'"))
        written = [int(i) for (i,) in ids]
    assert written and all(deletes_logged(cache.entries, i) == 1 for i in written)


def test_an_answer_that_updates_an_indexed_entry_leaves_no_vector_behind(
    cache: SemanticCache, clock: ManualClock
) -> None:
    """The upsert may update an entry already indexed (the same question stored after
    the fence): its row was deleted and its vector stayed in the index (a review). The
    entry goes whole, the newer answer with it: a miss, never an old answer kept."""
    asked_at = clock()
    clock.advance(30)
    cache.fence("tenant-a")
    clock.advance(FENCE_MARGIN.total_seconds() + 1)
    assert cache.store(chat(STORED), reply("new"), asked_at=clock()).stored  # the control
    assert len(cache.index) == 1
    result = cache.store(chat(STORED), reply("old"), asked_at=asked_at)
    assert result.reason == "invalidated"
    assert cache.entries.count(tenant="tenant-a") == 0
    assert len(cache.index) == 0
    assert not cache.lookup(chat(PARAPHRASE)).hit


def test_an_answer_asked_after_the_fence_is_kept(cache: SemanticCache, clock: ManualClock) -> None:
    cache.fence("tenant-a")
    clock.advance(FENCE_MARGIN.total_seconds() + 1)  # asked after the invalidation
    result = cache.store(chat(STORED), reply(), asked_at=clock())
    assert result.stored
    assert cache.lookup(chat(PARAPHRASE)).hit


def test_a_question_just_after_the_fence_counts_as_before_it(
    cache: SemanticCache, clock: ManualClock
) -> None:
    """Replica clocks differ: within the margin an answer is left out, never kept wrongly."""
    cache.fence("tenant-a")
    clock.advance(FENCE_MARGIN.total_seconds() / 2)
    assert cache.store(chat(STORED), reply(), asked_at=clock()).reason == "invalidated"


def test_another_tenants_fence_changes_nothing(cache: SemanticCache, clock: ManualClock) -> None:
    asked_at = clock()
    cache.fence("tenant-b")
    assert cache.store(chat(STORED), reply(), asked_at=asked_at).stored  # tenant-a's
    fenced = cache.store(chat(STORED, tenant="tenant-b"), reply(), asked_at=asked_at)
    assert fenced.reason == "invalidated"  # the positive control: tenant-b's own


def test_without_asked_at_nothing_is_checked(cache: SemanticCache) -> None:
    cache.fence("tenant-a")
    assert cache.store(chat(STORED), reply()).stored  # a seed or a migration, not a request


def test_a_later_fence_moves_it_forward(backend_store: EntryStore, clock: ManualClock) -> None:
    first = clock()
    raise_fence(backend_store, "tenant-a", first)
    later = first + timedelta(minutes=10)
    assert not is_fenced(backend_store, "tenant-a", later)
    raise_fence(backend_store, "tenant-a", later)
    assert is_fenced(backend_store, "tenant-a", later)
    assert not is_fenced(backend_store, "tenant-b", first)


def test_a_fence_that_cannot_be_read_keeps_no_answer(
    cache: SemanticCache, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fence is read after the entry commits; when that read fails the entry went
    on being served everywhere, though an invalidation might have overtaken it (a
    review, session 41). It is deleted now, and the error goes on as before."""
    import semantic.fences as fences

    asked_at = clock()
    assert cache.store(chat(STORED), reply(), asked_at=asked_at).stored  # the control

    def unreadable(*args: object) -> bool:
        raise StoreUnavailableError("test: the fence read failed")

    monkeypatch.setattr(fences, "is_fenced", unreadable)
    with pytest.raises(StoreUnavailableError):
        cache.store(chat(PARAPHRASE), reply("later"), asked_at=clock())
    assert cache.entries.count(tenant="tenant-a") == 1  # the first answer alone
    hit = cache.lookup(chat(PARAPHRASE))
    assert hit.hit and hit.entry_id is not None
    assert cache.entries.get_many([hit.entry_id])[hit.entry_id].question == STORED


def blip(cache: SemanticCache, monkeypatch: pytest.MonkeyPatch) -> None:
    """One database blip just after an entry commits: the fence read and the delete
    that stands in for it both fail (undone by ``monkeypatch.undo()``)."""
    import semantic.fences as fences

    def down(*args: object, **kwargs: object) -> object:
        raise StoreUnavailableError("test: the database blinked")

    monkeypatch.setattr(fences, "is_fenced", down)
    monkeypatch.setattr(cache.entries, "delete", down)


def left_unsettled(cache: SemanticCache, clock: ManualClock, mp: pytest.MonkeyPatch) -> None:
    """An answer to a question asked before its tenant's fence, stored during a blip
    that fails both its fence read and its stand-in delete (the blip still on)."""
    asked_at = clock()
    clock.advance(30)
    cache.fence("tenant-a")
    blip(cache, mp)
    with pytest.raises(StoreUnavailableError):
        cache.store(chat(STORED), reply("old"), asked_at=asked_at)


@pytest.mark.parametrize("overtaken", [True, False])
def test_an_entry_a_blip_left_unsettled_is_settled_by_the_next_write(
    cache: SemanticCache,
    embedder: Embedder,
    backend_store: EntryStore,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    overtaken: bool,
) -> None:
    """The entry committed, then neither its fence nor its delete could be read: it
    stayed in the database and every replica's rebuild served it, though an
    invalidation had overtaken it (a review, session 44). The next write settles it:
    deleted when the fence overtook it; kept when none did (the control)."""
    asked_at = clock()
    clock.advance(30)
    if overtaken:
        cache.fence("tenant-a")
    clock.advance(1)
    blip(cache, monkeypatch)
    with pytest.raises(StoreUnavailableError):
        cache.store(chat(STORED), reply("old"), asked_at=asked_at)
    monkeypatch.undo()  # the database is back
    assert cache.entries.count(tenant="tenant-a") == 1  # still there, not yet settled
    other = chat("What are your opening hours?", tenant="tenant-b")
    assert cache.store(other, reply("9 to 5"), asked_at=clock()).stored
    assert cache.entries.count(tenant="tenant-a") == (0 if overtaken else 1)
    restarted = SemanticCache(embedder, backend_store, clock=clock, hit_flush_seconds=None)
    try:
        restarted.rebuild(progress=False)
        assert restarted.lookup(chat(PARAPHRASE)).hit is not overtaken
        assert restarted.lookup(other).hit  # the positive control of the lookup
    finally:
        restarted.close()


def test_an_unsettled_entry_is_settled_on_close(
    cache: SemanticCache, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    left_unsettled(cache, clock, monkeypatch)
    monkeypatch.undo()
    cache.close()  # a graceful shutdown before any other write
    assert cache.entries.count(tenant="tenant-a") == 0


def test_settling_waits_while_the_database_is_still_away(
    cache: SemanticCache, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    left_unsettled(cache, clock, monkeypatch)
    cache.settle()  # still away: nothing settled, nothing raised
    assert len(cache.unsettled) == 1
    monkeypatch.undo()
    cache.settle()
    assert len(cache.unsettled) == 0
    assert cache.entries.count(tenant="tenant-a") == 0


def test_a_replay_of_the_change_log_settles_first(
    cache: SemanticCache, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The change log names the unsettled entry (its upsert committed): replaying it
    would index it on this replica, so the replay settles first."""
    left_unsettled(cache, clock, monkeypatch)
    monkeypatch.undo()
    with cache.entries.engine.connect() as conn:
        ids = conn.execute(text("SELECT entry_id FROM cache_changes WHERE op = 'upsert'"))
        written = [int(i) for (i,) in ids]
    assert len(written) == 1
    row = cache.entries.get_many(written)[written[0]]
    logged = Change(1, clock(), UPSERT, row.partition_key, written[0], "tenant-a")
    replay(cache, [logged])
    assert cache.entries.count(tenant="tenant-a") == 0
    assert len(cache.index) == 0
    assert not cache.lookup(chat(PARAPHRASE)).hit


def test_an_unsettled_entry_is_not_indexed_while_its_fence_stays_unread(
    cache: SemanticCache, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows read again but the fence not yet (a review, session 45): a rebuild or a
    replay of the log indexed the entry and served it until the next write."""
    import semantic.fences as fences

    left_unsettled(cache, clock, monkeypatch)
    monkeypatch.undo()

    def unread(*args: object) -> bool:
        raise StoreUnavailableError("test: the fence is still unread")

    monkeypatch.setattr(fences, "is_fenced", unread)  # the rows answer, the fence not
    cache.rebuild(progress=False)
    assert not cache.lookup(chat(PARAPHRASE)).hit
    with cache.entries.engine.connect() as conn:
        ids = conn.execute(text("SELECT entry_id FROM cache_changes WHERE op = 'upsert'"))
        written = [int(i) for (i,) in ids]
    row = cache.entries.get_many(written)[written[0]]
    replay(cache, [Change(1, clock(), UPSERT, row.partition_key, written[0], "tenant-a")])
    assert not cache.lookup(chat(PARAPHRASE)).hit
    assert len(cache.unsettled) == 1
    monkeypatch.undo()  # and once the fence reads, it is settled: deleted
    cache.settle()
    assert cache.entries.count(tenant="tenant-a") == 0
