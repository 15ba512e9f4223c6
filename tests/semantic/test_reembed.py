"""Switching embedders: entries stored with MiniLM are re-embedded with e5 under e5's
partitions, e5 lookups hit them, and no lookup ever searches the other embedder's
vectors (both are 384-d, so only the partition keeps them apart). Real models,
real SQLite."""

from __future__ import annotations

import pytest

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.errors import InvalidQuestionError
from semantic.reembed import reembed, rekey_for
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


def _fill(cache: SemanticCache, questions: list[str], tenant: str = "tenant-a") -> None:
    for i, question in enumerate(questions):
        assert cache.store(chat(question, tenant=tenant), reply(f"answer {i}")).stored


def _index_rows(cache: SemanticCache) -> dict[str, set[str]]:
    """Partition -> the embedder ids of the rows its index holds."""
    out: dict[str, set[str]] = {}
    for key in cache.index.partitions():
        index = cache.index.get(key)
        assert index is not None
        rows = cache.entries.get_many(index.ids())
        out[key] = {row.embedder_id for row in rows.values()}
    return out


def test_switch_to_e5_serves_the_same_entries(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, e5: E5Embedder
) -> None:
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    _fill(old, QUESTIONS)
    queries = [chat(q) for q in QUESTIONS]
    old_keys = {q.partition_key(embedder.embedder_id) for q in queries}

    report = reembed(
        old.entries, e5, rekey_for(queries, embedder.embedder_id), now=clock(), progress=False
    )
    assert (report.written, report.dropped, report.no_partition) == (3, 3, 0)
    assert report.embedder_id == e5.embedder_id
    assert old.entries.count(embedder_id=embedder.embedder_id) == 0
    assert old.entries.count(embedder_id=e5.embedder_id) == 3

    new = SemanticCache(e5, EntryStore(sqlite_url), clock=clock)
    assert new.rebuild(progress=False) == 3
    hit = new.lookup(chat("How can I reset my password?"))
    assert hit.hit and hit.answer is not None
    assert hit.answer["choices"][0]["message"]["content"] == "answer 0"
    # every index of the e5 cache is an e5 partition holding e5 rows only
    assert _index_rows(new) == {q.partition_key(e5.embedder_id): {e5.embedder_id} for q in queries}
    assert not old_keys & set(new.index.partitions())


def test_old_embedder_never_searches_new_vectors(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, e5: E5Embedder
) -> None:
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    _fill(old, QUESTIONS)
    queries = [chat(q) for q in QUESTIONS]
    reembed(
        old.entries,
        e5,
        rekey_for(queries, embedder.embedder_id),
        drop_old=False,
        now=clock(),
        progress=False,
    )
    assert old.entries.count() == 6  # both generations side by side, none overwritten
    # A MiniLM process (e.g. a replica not yet switched) rebuilds MiniLM rows only.
    minilm = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    assert minilm.rebuild(progress=False) == 3
    assert all(ids == {embedder.embedder_id} for ids in _index_rows(minilm).values())
    assert minilm.lookup(chat("How can I reset my password?")).hit
    # After the old rows are dropped, MiniLM finds nothing: e5 vectors are never its own.
    reembed(old.entries, e5, rekey_for(queries, embedder.embedder_id), progress=False)
    assert minilm.rebuild(progress=False) == 0
    missed = minilm.lookup(chat("How do I reset my password?"))
    assert not missed.hit and missed.reason == "empty"


def test_unsupported_and_unknown_partitions_are_not_carried(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, e5: E5Embedder
) -> None:
    source = SemanticCache(e5, EntryStore(sqlite_url), clock=clock)
    _fill(source, ["怎么修改登录密码", "How do I get an invoice?"])
    _fill(source, ["What are your opening hours?"], tenant="tenant-b")
    # tenant-b's partition is not in the map: its new partition key is unknown
    known = [chat("怎么修改登录密码")]
    report = reembed(
        source.entries, embedder, rekey_for(known, e5.embedder_id), now=clock(), progress=False
    )
    # MiniLM cannot represent the Chinese question: it is not written under MiniLM
    assert (report.written, report.unsupported, report.no_partition) == (1, 1, 1)
    assert report.dropped == 3
    assert source.entries.count() == 1


def test_a_failure_keeps_the_old_entries(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, e5: E5Embedder
) -> None:
    # about 300 tokens: inside e5's 512-token window, past MiniLM's 256
    long = "Please explain in detail " + "how refunds work and " * 60 + "what I should do?"
    source = SemanticCache(e5, EntryStore(sqlite_url), clock=clock)
    _fill(source, ["How do I get an invoice?", long])
    queries = [chat("How do I get an invoice?"), chat(long)]
    with pytest.raises(InvalidQuestionError):
        reembed(source.entries, embedder, rekey_for(queries, e5.embedder_id), progress=False)
    assert source.entries.count(embedder_id=e5.embedder_id) == 2  # nothing dropped
    with pytest.raises(ValueError):
        reembed(
            source.entries,
            e5,
            rekey_for(queries, e5.embedder_id),
            source_embedder_id=e5.embedder_id,
        )


@pytest.mark.parametrize("drop_old", [True, False], ids=["move", "copy"])
def test_a_fresher_answer_under_the_new_embedder_is_kept(
    sqlite_url: str, clock: ManualClock, embedder: Embedder, e5: E5Embedder, drop_old: bool
) -> None:
    """A backfill under the new embedder got there first: its answer is newer than the
    old entry's, so the re-embed leaves it as it is (it used to overwrite it with the
    older answer and stamp it new). The other questions are the control: carried."""
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    _fill(old, QUESTIONS)
    clock.advance(60)
    new = SemanticCache(e5, EntryStore(sqlite_url), clock=clock)
    assert new.store(chat(QUESTIONS[0]), reply("the fresher answer")).stored
    fresher = new.lookup(chat(QUESTIONS[0]))
    assert fresher.hit and fresher.entry_id is not None
    before = new.entries.get(fresher.entry_id)
    clock.advance(60)
    queries = [chat(q) for q in QUESTIONS]
    report = reembed(
        old.entries,
        e5,
        rekey_for(queries, embedder.embedder_id),
        drop_old=drop_old,
        now=clock(),
        progress=False,
    )
    assert (report.written, report.kept) == (2, 1)
    assert report.dropped == (3 if drop_old else 0)
    after = new.entries.get(fresher.entry_id)
    assert after.answer == before.answer and after.updated_at == before.updated_at
    assert after.answer["choices"][0]["message"]["content"] == "the fresher answer"
    rebuilt = SemanticCache(e5, EntryStore(sqlite_url), clock=clock)
    assert rebuilt.rebuild(progress=False) == 3
    carried = rebuilt.lookup(chat(QUESTIONS[1]))
    assert carried.hit and carried.answer is not None
    assert carried.answer["choices"][0]["message"]["content"] == "answer 1"


def test_an_entry_deleted_while_it_is_embedded_is_not_written_again(
    sqlite_url: str,
    clock: ManualClock,
    embedder: Embedder,
    e5: E5Embedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An operator invalidates an entry between its read and its write: moving carries
    only the rows its own delete finds, so the invalidated answer is not served again."""
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    _fill(old, QUESTIONS)
    victim = old.lookup(chat(QUESTIONS[2]))
    assert victim.entry_id is not None
    embed = e5.embed

    def embed_then_invalidate(texts: list[str]) -> object:
        vectors = embed(texts)
        old.invalidate(entry_id=victim.entry_id)  # lands while the batch is embedded
        return vectors

    monkeypatch.setattr(e5, "embed", embed_then_invalidate)
    queries = [chat(q) for q in QUESTIONS]
    report = reembed(
        old.entries, e5, rekey_for(queries, embedder.embedder_id), now=clock(), progress=False
    )
    assert (report.written, report.gone, report.dropped) == (2, 1, 2)
    assert old.entries.count(embedder_id=e5.embedder_id) == 2
    rebuilt = SemanticCache(e5, EntryStore(sqlite_url), clock=clock)
    rebuilt.rebuild(progress=False)
    assert not rebuilt.lookup(chat(QUESTIONS[2])).hit
    assert rebuilt.lookup(chat(QUESTIONS[0])).hit  # the control: carried


@pytest.mark.parametrize("drop_old", [True, False], ids=["move", "copy"])
def test_a_tenant_invalidated_while_it_is_carried_keeps_none_of_it(
    sqlite_url: str,
    clock: ManualClock,
    embedder: Embedder,
    e5: E5Embedder,
    monkeypatch: pytest.MonkeyPatch,
    drop_old: bool,
) -> None:
    """An invalidation of tenant-a lands while its batch is carried: its delete cannot
    see the rows the move writes (uncommitted), so the fence it raised first decides,
    as for a partition's carry-over (semantic/migrate_partition.py); before session 44
    the re-embedded answers came back. Tenant-b, not invalidated, is the control."""
    old = SemanticCache(embedder, EntryStore(sqlite_url), clock=clock)
    _fill(old, QUESTIONS[:2], tenant="tenant-a")
    _fill(old, QUESTIONS[2:], tenant="tenant-b")
    embed = e5.embed

    def embed_then_fence(texts: list[str]) -> object:
        vectors = embed(texts)
        old.fence("tenant-a")  # its delete then finds nothing it can see
        return vectors

    monkeypatch.setattr(e5, "embed", embed_then_fence)
    queries = [chat(q, tenant="tenant-a") for q in QUESTIONS[:2]]
    queries += [chat(q, tenant="tenant-b") for q in QUESTIONS[2:]]
    report = reembed(
        old.entries, e5, rekey_for(queries, embedder.embedder_id), now=clock(),
        drop_old=drop_old, progress=False,
    )  # fmt: skip
    assert (report.written, report.gone) == (1, 2)
    carried = old.entries.count(embedder_id=e5.embedder_id)
    assert carried == 1  # tenant-b's only
    rebuilt = SemanticCache(e5, EntryStore(sqlite_url), clock=clock)
    rebuilt.rebuild(progress=False)
    assert not rebuilt.lookup(chat(QUESTIONS[0], tenant="tenant-a")).hit
    assert rebuilt.lookup(chat(QUESTIONS[2], tenant="tenant-b")).hit
