"""The semantic index at start-up: from a snapshot replayed forward, or rebuilt.

With ``CACHEGATE_INDEX_SNAPSHOT_DIR`` set, a start loads the snapshot in force
(:mod:`semantic.snapshot`), checks it against the database and replays the change
log forward from the position it records, through the replica-sync feed
(:meth:`ChangeFeed.resume`, then polls until caught up, before serving): entries
stored or deleted since, by any replica, are found or gone as if it had been
rebuilt. It is rebuilt from the database instead, and a new snapshot written,
when the snapshot is missing, written with another embedder, snapshot format,
database schema or faiss version, damaged (including partition bytes that faiss
cannot read), ahead of the database's log (another database), older than the
log's retention (the feed rebuilds), or when after the replay the index and the
database disagree on the entry count. A snapshot is only ever a faster start:
none of this, nor a snapshot that cannot be written after the rebuild (a full
disk, a read-only directory), stops the gateway from starting.

:class:`SnapshotWriter` writes a snapshot every ``every_seconds`` when the log
position moved, and once more at shutdown, so the next start replays little.
The index is copied to memory with replays and writes held off (the copy must
match its position); the disk write happens after, with nothing held.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from gateway.sync.feed import ChangeFeed
from migrations.runner import alembic_config
from semantic.cache import SemanticCache
from semantic.snapshot import Loaded, Position, load_snapshot, restore_index, save_snapshot

log = logging.getLogger("cachegate.index")


def schema_tag() -> str:
    """The database schema the snapshot's rows were read under (the migration head)."""
    from alembic.script import ScriptDirectory

    return str(ScriptDirectory.from_config(alembic_config()).get_current_head())


def start_index(cache: SemanticCache, feed: ChangeFeed, directory: Path | None, schema: str) -> str:
    """Fill ``cache``'s index and position ``feed``; returns how (for the log)."""
    if directory is None:
        feed.mark()  # before the rebuild: nothing committed meanwhile is missed
        cache.rebuild(progress=True)
        return "rebuilt (no snapshot directory)"
    started = time.perf_counter()
    loaded = load_snapshot(
        directory, embedder_id=cache.embedder_id, dim=cache.index.dim, schema=schema
    )
    reason = _resume(cache, feed, loaded) if loaded.ok else loaded.reason
    if not reason:
        took = time.perf_counter() - started
        return f"snapshot: {len(cache.index)} entries, replayed forward, {took:.1f}s"
    log.warning("semantic index snapshot not used (%s): rebuilding from the database", reason)
    feed.mark()
    cache.rebuild(progress=True)
    # The rebuilt index serves either way: a snapshot that cannot be written (full
    # disk, read-only directory) only means the next start rebuilds again.
    if not SnapshotWriter(cache, feed, directory, schema).save_logged():
        return f"rebuilt ({reason}); the snapshot could not be written"
    return f"rebuilt ({reason})"


def _resume(cache: SemanticCache, feed: ChangeFeed, loaded: Loaded) -> str:
    """Load the snapshot, replay the log forward and compare; "" when the index is good."""
    assert loaded.position is not None
    if loaded.position.seq > feed.head():  # the log's sequence, which pruning leaves
        return f"snapshot seq {loaded.position.seq} is ahead of the database's change log"
    with cache.write_lock:
        try:
            restore_index(cache.index, loaded)
        except Exception as exc:
            # Not only ValueError: bytes the CRC accepts but faiss cannot read (another
            # faiss build, a truncated image) raise RuntimeError from faiss, and a
            # hand-edited manifest AttributeError or TypeError. All mean a rebuild; the
            # index is emptied first so that nothing of the snapshot outlives it.
            cache.index.clear()
            return f"corrupt: {type(exc).__name__}: {str(exc)[:200]}"
    # with the row it stood on: rewritten by a restored database, the first poll rebuilds
    feed.resume(loaded.position.seq, loaded.position.at, loaded.position.head_at)
    for _attempt in range(2):  # a second pass when another replica wrote meanwhile
        while feed.sync_once():
            pass
        cache.purge_expired()  # expired while on disk: deleted (and logged), dropped here
        expected = cache.entries.count(embedder_id=cache.embedder_id)
        if len(cache.index) == expected:
            return ""
    return f"the index holds {len(cache.index)} entries after the replay, the database {expected}"


class SnapshotWriter:
    """Writes the index's snapshot now and then, and at shutdown (see the module)."""

    def __init__(
        self,
        cache: SemanticCache,
        feed: ChangeFeed,
        directory: Path,
        schema: str,
        every_seconds: float = 600.0,
    ) -> None:
        self.cache, self.feed, self.directory, self.schema = cache, feed, directory, schema
        self.every_seconds = every_seconds
        self._saved_seq: int | None = None
        self._saved_mono = 0.0  # when the last snapshot was written (time.monotonic())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def save(self) -> Path | None:
        """Write a snapshot unless the position has not moved since the last one, and
        that one is younger than half the feed's retention: an idle index's snapshot
        is written again with its newer time, or a start after a quiet hour found it
        older than the log's retention and rebuilt (a review, session 44)."""
        fresh_for = self.feed.retention_seconds / 2
        with self.feed.paused() as (seq, at), self.cache.write_lock:
            if at is None:
                return None  # never positioned (database down)
            if seq == self._saved_seq and time.monotonic() - self._saved_mono < fresh_for:
                return None  # nothing new
            images = self.cache.index.images()
            head_at = self.feed.head_at()
        started = time.perf_counter()
        path = save_snapshot(
            self.directory,
            images,
            position=Position(seq, at, head_at),
            embedder_id=self.cache.embedder_id,
            dim=self.cache.index.dim,
            schema=self.schema,
        )
        self._saved_seq, self._saved_mono = seq, time.monotonic()
        log.info(
            "semantic index snapshot at seq %d written in %.1fs", seq, time.perf_counter() - started
        )
        return path

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cachegate-snapshot", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the timer and write the last snapshot (call after the feed stopped polling)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.save_logged()

    def _run(self) -> None:
        while not self._stop.wait(self.every_seconds):
            self.save_logged()

    def save_logged(self) -> bool:
        """:meth:`save`, with a failure logged instead of raised; False when it failed."""
        try:
            self.save()
        except Exception:  # a failed snapshot only makes the next start slower
            log.exception("semantic index snapshot failed (the index in memory serves on)")
            return False
        return True
