"""Start-up of the semantic index from a snapshot (gateway/index_snapshots.py), on a
real SQLite file, the real embedder and the real change feed: a snapshot older than
the latest writes is replayed forward, unusable snapshots are rebuilt, and a snapshot
that cannot be read by faiss or cannot be written never stops the start."""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

import gateway.index_snapshots as index_snapshots
from gateway.index_snapshots import SnapshotWriter, start_index
from gateway.sync.feed import ChangeFeed
from migrations.runner import upgrade_database
from semantic import Embedder, EntryStore, PartitionedIndex, SemanticCache
from semantic.model_files import bundled_model_path
from semantic.partition import SemanticQuery
from tests.gateway.sync.test_feed_restore import HOURS, REFUND, go_back

QUESTIONS = [f"What is the status of shipment number {i} to warehouse {i % 7}?" for i in range(60)]


def ask(question: str) -> SemanticQuery:
    body = {"model": "m", "messages": [{"role": "user", "content": question}], "temperature": 0}
    return SemanticQuery.from_chat(tenant="t", body=body)


def answer(text: str) -> dict[str, object]:
    return {
        "id": "c",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
    }


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'gw.db'}"
    upgrade_database(url)
    return url


class Replica:
    """One gateway's semantic side: a cache with an empty index and its feed."""

    def __init__(self, url: str, embedder: Embedder) -> None:
        self.cache = SemanticCache(embedder, EntryStore(url), PartitionedIndex(embedder.dim))
        self.feed = ChangeFeed(url, self.cache, poll_seconds=0.2)

    def close(self) -> None:
        self.feed.stop()
        self.cache.entries.close()

    def found(self, question: str) -> int | None:
        result = self.cache.lookup(ask(question))
        return result.entry_id if result.hit else None


@pytest.fixture
def replicas(url: str, embedder: Embedder) -> Iterator[list[Replica]]:
    made: list[Replica] = []
    yield made
    for replica in made:
        replica.close()


def test_snapshot_is_replayed_forward_to_the_database(
    url: str, embedder: Embedder, tmp_path: Path, replicas: list[Replica]
) -> None:
    snaps = tmp_path / "snapshots"
    first = Replica(url, embedder)
    replicas.append(first)
    vectors = embedder.embed(QUESTIONS)
    ids = [
        first.cache.store(ask(q), answer(q), embedding=v).entry_id
        for q, v in zip(QUESTIONS[:50], vectors[:50], strict=True)
    ]
    assert start_index(first.cache, first.feed, snaps, "s1").startswith("rebuilt (missing")
    # After the snapshot: ten entries added, two deleted (one by id, one expired away).
    for q, v in zip(QUESTIONS[50:], vectors[50:], strict=True):
        first.cache.store(ask(q), answer(q), embedding=v)
    first.cache.invalidate(entry_id=ids[3])
    first.cache.invalidate(entry_id=ids[4])

    second = Replica(url, embedder)
    replicas.append(second)
    how = start_index(second.cache, second.feed, snaps, "s1")
    assert how.startswith("snapshot: 58 entries"), how
    assert second.feed.stats()["rebuilds"] == 0  # replayed, not rebuilt
    index = second.cache.index.get(second.cache.partition_key(ask("x")))
    assert index is not None
    added = second.cache.lookup(ask(QUESTIONS[55]))
    assert added.hit and added.cached_question == QUESTIONS[55]  # stored after the snapshot
    assert ids[3] not in index and ids[4] not in index  # deleted after the snapshot
    assert second.found(QUESTIONS[10]) == ids[10]
    reference = first.cache.index.get(first.cache.partition_key(ask("x")))
    assert reference is not None and index.ids() == reference.ids()


def _stored(url: str, embedder: Embedder, replicas: list[Replica]) -> Replica:
    """A replica that stored the first 20 questions (in the database and its index)."""
    first = Replica(url, embedder)
    replicas.append(first)
    vectors = embedder.embed(QUESTIONS[:20])
    for q, v in zip(QUESTIONS[:20], vectors, strict=True):
        first.cache.store(ask(q), answer(q), embedding=v)
    return first


def _snapshot_of(url: str, embedder: Embedder, snaps: Path, replicas: list[Replica]) -> Replica:
    first = _stored(url, embedder, replicas)
    first.feed.mark()
    assert SnapshotWriter(first.cache, first.feed, snaps, "s1").save() is not None
    return first


def test_a_damaged_snapshot_is_rebuilt_not_a_crash(
    url: str, embedder: Embedder, tmp_path: Path, replicas: list[Replica]
) -> None:
    snaps = tmp_path / "snapshots"
    _snapshot_of(url, embedder, snaps, replicas)
    part = next(snaps.glob("snap-*/part-*.npz"))
    part.write_bytes(part.read_bytes()[:100])
    second = Replica(url, embedder)
    replicas.append(second)
    how = start_index(second.cache, second.feed, snaps, "s1")
    assert how.startswith("rebuilt (corrupt"), how
    assert len(second.cache.index) == 20 and second.found(QUESTIONS[7]) is not None
    # The rebuild wrote a good snapshot: the next start uses it.
    third = Replica(url, embedder)
    replicas.append(third)
    assert start_index(third.cache, third.feed, snaps, "s1").startswith("snapshot: 20 entries")


def test_another_embedders_or_schemas_snapshot_is_rebuilt(
    url: str, embedder: Embedder, tmp_path: Path, replicas: list[Replica]
) -> None:
    snaps = tmp_path / "snapshots"
    _snapshot_of(url, embedder, snaps, replicas)
    again = Replica(url, embedder)
    replicas.append(again)
    assert start_index(again.cache, again.feed, snaps, "s2").startswith("rebuilt (schema")
    assert len(again.cache.index) == 20
    # That rebuild wrote an "s2" snapshot; another embedder's replica cannot use it.
    renamed = Embedder(bundled_model_path(), name="minilm-by-path", progress=False)
    other = Replica(url, renamed)
    replicas.append(other)
    how = start_index(other.cache, other.feed, snaps, "s2")
    assert how == "rebuilt (written with another embedder)"
    assert len(other.cache.index) == 0  # the stored vectors belong to the other embedder id


def _truncate_faiss_bytes(snaps: Path) -> None:
    """Half of the faiss image, re-zipped: every CRC is right, faiss cannot read it."""
    part = next(snaps.glob("snap-*/part-*.npz"))
    with np.load(part) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["faiss"] = arrays["faiss"][: len(arrays["faiss"]) // 2]
    with part.open("wb") as fh:
        np.savez(fh, **arrays)


def _edit_manifest_kind(snaps: Path) -> None:
    """A hand-edited manifest: the flat partition called HNSW (from_image then reaches
    for an ``hnsw`` attribute the flat faiss index does not have)."""
    manifest = next(snaps.glob("snap-*/manifest.json"))
    data = json.loads(manifest.read_text())
    for part in data["partitions"]:
        part["kind"] = "hnsw"
    manifest.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("damage", "error"),
    [(_truncate_faiss_bytes, "RuntimeError"), (_edit_manifest_kind, "AttributeError")],
    ids=["faiss-unreadable", "manifest-kind-edited"],
)
def test_a_snapshot_faiss_cannot_restore_is_rebuilt_not_a_crash(
    url: str,
    embedder: Embedder,
    tmp_path: Path,
    replicas: list[Replica],
    caplog: pytest.LogCaptureFixture,
    damage: object,
    error: str,
) -> None:
    snaps = tmp_path / "snapshots"
    _snapshot_of(url, embedder, snaps, replicas)
    assert callable(damage)
    damage(snaps)
    second = Replica(url, embedder)
    replicas.append(second)
    with caplog.at_level(logging.WARNING, logger="cachegate.index"):
        how = start_index(second.cache, second.feed, snaps, "s1")
    assert how.startswith(f"rebuilt (corrupt: {error}"), how
    assert any("snapshot not used (corrupt" in r.getMessage() for r in caplog.records)
    assert len(second.cache.index) == 20 and second.found(QUESTIONS[7]) is not None
    # Positive control: the rebuild wrote a good snapshot, and the next start restores it.
    third = Replica(url, embedder)
    replicas.append(third)
    assert start_index(third.cache, third.feed, snaps, "s1").startswith("snapshot: 20 entries")
    assert third.found(QUESTIONS[7]) is not None


def test_a_snapshot_that_cannot_be_written_does_not_stop_the_start(
    url: str,
    embedder: Embedder,
    tmp_path: Path,
    replicas: list[Replica],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _stored(url, embedder, replicas)

    def disk_full(*args: object, **kwargs: object) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")

    full = Replica(url, embedder)
    replicas.append(full)
    with monkeypatch.context() as patched, caplog.at_level(logging.WARNING, "cachegate.index"):
        patched.setattr(index_snapshots, "save_snapshot", disk_full)
        how = start_index(full.cache, full.feed, tmp_path / "full", "s1")
    assert how == "rebuilt (missing); the snapshot could not be written", how
    assert any("snapshot failed" in r.getMessage() for r in caplog.records)
    assert len(full.cache.index) == 20 and full.found(QUESTIONS[7]) is not None

    # A directory that cannot be made, without any patching (root may write anywhere
    # chmod forbids, so not a read-only directory): its "parent" is a file.
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    blocked = Replica(url, embedder)
    replicas.append(blocked)
    how = start_index(blocked.cache, blocked.feed, blocker / "snapshots", "s1")
    assert how.startswith("rebuilt (unreadable") and how.endswith("could not be written"), how
    assert len(blocked.cache.index) == 20 and blocked.found(QUESTIONS[7]) is not None

    # Positive control: with room again, the same start writes its snapshot.
    ok = Replica(url, embedder)
    replicas.append(ok)
    assert start_index(ok.cache, ok.feed, tmp_path / "full", "s1") == "rebuilt (missing)"
    assert (tmp_path / "full" / "CURRENT").exists()


def test_a_snapshot_from_before_a_database_restore_is_not_replayed(
    url: str, embedder: Embedder, tmp_path: Path, replicas: list[Replica]
) -> None:
    """The database went back in time after the snapshot (a restore, a lossy failover)
    and handed the snapshot's last seq and entry id out again: the log caught up with
    the snapshot's position, and the entry count matched, so the snapshot was loaded
    with the old question's vector under an id now holding another question. The row
    at the snapshot's position is compared as it was logged: rewritten, it rebuilds."""
    snaps = tmp_path / "snapshots"
    first = Replica(url, embedder)
    replicas.append(first)
    hours = first.cache.store(ask(HOURS), answer("Nine to five.")).entry_id
    assert hours is not None
    assert start_index(first.cache, first.feed, snaps, "s1").startswith("rebuilt (missing")
    go_back(first.cache, hours)  # the restore
    refund = first.cache.store(ask(REFUND), answer("Thirty days.")).entry_id
    assert refund == hours
    second = Replica(url, embedder)
    replicas.append(second)
    start_index(second.cache, second.feed, snaps, "s1")
    assert second.feed.stats()["rebuilds"] == 1
    assert not second.cache.lookup(ask(HOURS)).hit
    served = second.cache.lookup(ask(REFUND))  # the control: the row as it is now
    assert served.hit and served.answer is not None
    assert served.answer["choices"][0]["message"]["content"] == "Thirty days."


def test_a_snapshot_of_an_idle_index_survives_the_log_being_pruned(
    url: str, embedder: Embedder, tmp_path: Path, replicas: list[Replica]
) -> None:
    """A quiet hour prunes every row of the change log. The snapshot's seq was read as
    ahead of the empty log and the index rebuilt on every later start (a review,
    session 44); the log's sequence is what it is compared with now."""
    snaps = tmp_path / "snapshots"
    first = _snapshot_of(url, embedder, snaps, replicas)
    with first.cache.entries.engine.begin() as conn:
        assert conn.execute(text("DELETE FROM cache_changes")).rowcount == 20  # pruned
    second = Replica(url, embedder)
    replicas.append(second)
    how = start_index(second.cache, second.feed, snaps, "s1")
    assert how.startswith("snapshot: 20 entries"), how
    assert second.found(QUESTIONS[7]) is not None


def test_an_idle_index_is_snapshotted_again_before_the_log_forgets_it(
    url: str, embedder: Embedder, tmp_path: Path, replicas: list[Replica]
) -> None:
    """Nothing new: no snapshot is written again, until the last one is half the log's
    retention old; then it is, with the feed's newer time, so a start after a quiet
    hour does not find it older than the retention and rebuild."""
    snaps = tmp_path / "snapshots"
    first = _stored(url, embedder, replicas)
    first.feed.mark()
    writer = SnapshotWriter(first.cache, first.feed, snaps, "s1")
    assert writer.save() is not None
    assert writer.save() is None  # nothing new (the control)
    writer._saved_mono -= first.feed.retention_seconds / 2 + 1  # the snapshot has aged
    assert writer.save() is not None
