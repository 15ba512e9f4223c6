"""``SemanticCache.withdraw``: an entry just stored whose writer the caller could not
confirm (the gateway's tenant check after the commit failed) is deleted now, or, when
the database refuses that delete too, kept out of the index and settled once the
database answers: deleted where ``is_orphan`` says its writer is gone, kept (the
control) where it is not. Real embedder, real migrated SQLite, the manual clock.

Through the gateway's backfill: tests/gateway/proxy/test_pipeline_backfill.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.errors import StoreUnavailableError
from semantic.store import EntryStore
from tests.semantic.helpers import PARAPHRASE, STORED, ManualClock, chat, reply

OTHER = chat("What are your opening hours?")


@pytest.fixture
def cache(embedder: Embedder, sqlite_url: str, clock: ManualClock) -> Iterator[SemanticCache]:
    store = EntryStore(sqlite_url)
    semantic = SemanticCache(embedder, store, clock=clock, hit_flush_seconds=None)
    yield semantic
    semantic.close()
    store.close()


def stored(cache: SemanticCache, clock: ManualClock) -> tuple[int, str]:
    result = cache.store(chat(STORED), reply(), asked_at=clock())
    assert result.stored and result.entry_id is not None
    assert cache.lookup(chat(PARAPHRASE)).hit  # served before it is withdrawn
    return result.entry_id, result.partition_key


def refused_delete(cache: SemanticCache, monkeypatch: pytest.MonkeyPatch) -> None:
    def down(*args: object, **kwargs: object) -> object:
        raise StoreUnavailableError("test: the database blinked")

    monkeypatch.setattr(cache.entries, "delete", down)


def test_a_withdrawn_entry_is_deleted_and_no_longer_served(
    cache: SemanticCache, clock: ManualClock
) -> None:
    assert cache.store(OTHER, reply("9 to 5"), asked_at=clock()).stored
    entry_id, key = stored(cache, clock)
    cache.withdraw(entry_id, key, "tenant-a", clock(), lambda: False)
    assert not cache.lookup(chat(PARAPHRASE)).hit
    assert cache.entries.count(tenant="tenant-a") == 1  # the other entry alone
    assert cache.lookup(OTHER).hit  # the positive control: untouched
    assert len(cache.unsettled) == 0


@pytest.mark.parametrize("orphan", [True, False])
def test_a_withdrawal_the_database_refuses_waits_out_of_the_index(
    cache: SemanticCache, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, orphan: bool
) -> None:
    entry_id, key = stored(cache, clock)
    asked: list[bool] = []

    def is_orphan() -> bool:
        asked.append(orphan)
        return orphan

    refused_delete(cache, monkeypatch)
    with pytest.raises(StoreUnavailableError):
        cache.withdraw(entry_id, key, "tenant-a", clock(), is_orphan)
    monkeypatch.undo()
    assert cache.entries.count(tenant="tenant-a") == 1  # still a row, no longer served
    assert not cache.lookup(chat(PARAPHRASE)).hit
    assert asked == []
    cache.settle()  # the database is back (each write, replay, rebuild and close do it)
    assert asked == [orphan]
    assert len(cache.unsettled) == 0
    assert cache.entries.count(tenant="tenant-a") == (0 if orphan else 1)
    cache.rebuild(progress=False)  # a writer still there: its entry is served again
    assert cache.lookup(chat(PARAPHRASE)).hit is not orphan


def test_a_writer_that_cannot_be_asked_yet_keeps_it_unsettled(
    cache: SemanticCache, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry_id, key = stored(cache, clock)
    refused_delete(cache, monkeypatch)
    away = StoreUnavailableError("test: still away")
    answers: Iterator[StoreUnavailableError | bool] = iter([away, away, True])

    def is_orphan() -> bool:
        answer = next(answers)
        if isinstance(answer, StoreUnavailableError):
            raise answer
        return answer

    with pytest.raises(StoreUnavailableError):
        cache.withdraw(entry_id, key, "tenant-a", clock(), is_orphan)
    monkeypatch.undo()
    cache.settle()  # the writer's check still fails: nothing settled, nothing raised
    assert len(cache.unsettled) == 1 and cache.entries.count(tenant="tenant-a") == 1
    cache.rebuild(progress=False)  # the rows read again, the writer not: not indexed
    assert not cache.lookup(chat(PARAPHRASE)).hit
    cache.close()  # a graceful shutdown settles it: the writer is gone, the entry too
    assert len(cache.unsettled) == 0 and cache.entries.count(tenant="tenant-a") == 0


def test_a_writer_check_that_hangs_stalls_no_other_write(
    cache: SemanticCache, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check of an unsettled entry's writer asks the tenant database; one that hangs
    (rather than fails) holds up the write that settles it, not every other write of the
    cache (a review, session 52: it ran under the write lock), nor a second settle."""
    entry_id, key = stored(cache, clock)
    asked, release = threading.Event(), threading.Event()

    def is_orphan() -> bool:
        asked.set()
        release.wait(30)
        return True

    refused_delete(cache, monkeypatch)
    with pytest.raises(StoreUnavailableError):
        cache.withdraw(entry_id, key, "tenant-a", clock(), is_orphan)
    monkeypatch.undo()
    first = threading.Thread(target=cache.store, args=(OTHER, reply("9 to 5")))
    first.start()  # this write settles first, and waits on the hanging check
    assert asked.wait(30)
    try:
        second = threading.Thread(target=cache.store, args=(chat("Do you ship abroad?"), reply()))
        second.start()
        second.join(10)
        assert not second.is_alive()  # not queued behind the hanging check
        assert cache.lookup(chat("Do you ship abroad?")).hit
        assert len(cache.unsettled) == 1  # its own settle went on without waiting either
    finally:
        release.set()
        first.join(30)
    assert not first.is_alive() and cache.lookup(OTHER).hit
    assert len(cache.unsettled) == 0 and cache.entries.count(tenant="tenant-a") == 2
    assert not cache.lookup(chat(PARAPHRASE)).hit  # the orphan: deleted, never served
