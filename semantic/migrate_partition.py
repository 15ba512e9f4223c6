"""Moving one partition to the current embedder: what :mod:`semantic.migrate` schedules.

The old rows are read in batches of :data:`~semantic.reembed.REEMBED_BATCH`, their
questions embedded with the current embedder (outside any lock), and each batch moved
in one transaction (:func:`semantic.store_move.move_entries`) under the cache's write
lock, its new rows added to the index. Expired rows and questions the embedder cannot
read whole are dropped with the rest; a question too long for its window is left out
on its own. Between batches the move stops when the migrator closes or the tenant is
gone (:class:`Stopped`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from semantic.cache import SemanticCache
from semantic.embedder_base import CoveringEmbedder, TextEmbedder
from semantic.embedders import MIN_COVERAGE
from semantic.errors import InvalidQuestionError
from semantic.fences import is_fenced
from semantic.reembed import REEMBED_BATCH
from semantic.store import NewEntry, StoredEntry
from semantic.store_move import move_entries
from semantic.vectors import check_vectors

log = logging.getLogger("cachegate.semantic.migrate")

#: Asked under the cache's write lock before and after writing (None: always wanted):
#: whether the partition's tenant is still the one that asked. One deleted meanwhile
#: gets nothing written, and what was written as the delete ran is removed again.
StillWanted = Callable[[], bool]


@dataclass(frozen=True)
class Migrated:
    """What carrying one partition over did; every old row is counted once."""

    source_embedder_id: str
    written: int = 0
    kept: int = 0  # the new partition already held the question (a fresher answer)
    expired: int = 0
    unsupported: int = 0  # the current embedder cannot read the question (coverage, length)
    gone: int = 0  # deleted by someone else while this ran: not carried
    dropped: int = 0  # old rows deleted by the move


class Stopped(Exception):
    """A migration stopped before the end: the migrator is closing, or the partition's
    tenant is gone (``gone``: its partitions need not be carried)."""

    def __init__(self, gone: bool) -> None:
        super().__init__("tenant gone" if gone else "closing")
        self.gone = gone


def carry_partition(
    cache: SemanticCache,
    partition_key: str,
    source: str,
    old_key: str,
    still_wanted: StillWanted | None = None,
    is_closing: Callable[[], bool] = lambda: False,
) -> Migrated:
    """Carry the partition ``old_key`` of embedder ``source`` over to ``partition_key``
    of ``cache``'s embedder now, a batch at a time. Raises :class:`Stopped` when
    ``is_closing`` says so between batches, or the tenant is gone: the rows not moved
    stay."""
    ids = sorted(cache.entries.ids_in_partition(old_key))
    counts = dict.fromkeys(("written", "kept", "expired", "unsupported", "gone", "dropped"), 0)
    for start in range(0, len(ids), REEMBED_BATCH):
        if is_closing():
            raise Stopped(gone=False)
        chunk = ids[start : start + REEMBED_BATCH]
        read_at = cache.now()  # the batch's answers are as of this read (fences)
        found = cache.entries.get_many(chunk)
        counts["gone"] += len(chunk) - len(found)
        now = cache.now()
        old = [found[i] for i in chunk if i in found]
        expired = {e.id for e in old if e.is_expired(now)}
        readable, vectors = _embed(cache.embedder, [e for e in old if e.id not in expired])
        carried = [
            (e, _carried(e, partition_key, cache.embedder_id, v))
            for e, v in zip(readable, vectors, strict=True)
        ]
        unreadable = {e.id for e in old} - expired - {e.id for e in readable}
        with cache.write_lock:
            if still_wanted is not None and not still_wanted():
                raise Stopped(gone=True)
            moved = move_entries(cache.entries, carried, [*expired, *unreadable])
            for entry in moved.written:
                cache.index.add(partition_key, [entry.id], entry.embedding.reshape(1, -1))
            if moved.written and still_wanted is not None and not still_wanted():
                # A delete through another replica committed while this was written.
                new_ids = [e.id for e in moved.written]
                cache.index.remove(partition_key, new_ids)
                cache.entries.delete(new_ids)
                raise Stopped(gone=True)
            if moved.written and _overtaken(cache, moved.written[0].tenant, read_at):
                # An invalidation ran while this batch moved: its delete could not see
                # the rows written here (uncommitted) and skipped the old ones (deleted
                # by the move), so the answers it meant to remove would come back.
                new_ids = [e.id for e in moved.written]
                cache.index.remove(partition_key, new_ids)
                cache.entries.delete(new_ids)  # logged: every replica drops them
                moved = replace(moved, written=[], gone=moved.gone | frozenset(new_ids))
        # a row deleted by someone else meanwhile counts as gone, whatever it was
        counts["expired"] += len(expired - moved.gone)
        counts["unsupported"] += len(unreadable - moved.gone)
        counts["written"] += len(moved.written)
        counts["kept"] += moved.kept
        counts["dropped"] += moved.dropped
        counts["gone"] += len(moved.gone)
    done = Migrated(source, **counts)
    # The key's prefix only: it is a hash, but logs need no more of it.
    log.info(
        "partition %s… carried over from %s: %d written, %d kept, %d expired, "
        "%d unsupported, %d gone meanwhile",
        partition_key[:12],
        source,
        done.written,
        done.kept,
        done.expired,
        done.unsupported,
        done.gone,
    )
    return done


def _overtaken(cache: SemanticCache, tenant: str, read_at: datetime) -> bool:
    """Whether ``tenant``'s cache was invalidated since ``read_at``; not knowing (the
    fence unreadable) counts as yes: the batch's answers are lost to the cache, never
    one kept that an invalidation meant to remove."""
    try:
        return is_fenced(cache.entries, tenant, read_at)
    except Exception:
        log.warning("invalidation fence unreadable: a carried batch is dropped")
        return True


def _embed(
    embedder: TextEmbedder, entries: Sequence[StoredEntry]
) -> tuple[list[StoredEntry], NDArray[np.float32]]:
    """The entries the current embedder reads whole, and their vectors. One question
    too long for its window fails the batch: it is then embedded one by one, so only
    that question is left out."""
    readable = [e for e in entries if _covered(embedder, e.question)]
    try:
        vectors = embedder.embed([e.question for e in readable])
        return readable, check_vectors(vectors, embedder.dim)
    except InvalidQuestionError:
        pass
    kept: list[StoredEntry] = []
    rows: list[NDArray[np.float32]] = []
    for entry in readable:
        try:
            rows.append(check_vectors(embedder.embed([entry.question]), embedder.dim)[0])
        except InvalidQuestionError:
            continue
        kept.append(entry)
    return kept, np.asarray(rows, dtype=np.float32).reshape(len(kept), embedder.dim)


def _covered(embedder: TextEmbedder, question: str) -> bool:
    """Whether the embedder reads all of ``question`` (asked of the embedder itself, not
    the cache's per-tenant memo, which these rows would crowd)."""
    return not isinstance(embedder, CoveringEmbedder) or (
        embedder.coverage(question) >= MIN_COVERAGE
    )


def _carried(
    entry: StoredEntry, partition_key: str, embedder_id: str, vector: NDArray[np.float32]
) -> NewEntry:
    """``entry`` as the current embedder's: same answer, entities and expiry (its times
    and hit count are kept by the move)."""
    return NewEntry(
        partition_key=partition_key,
        tenant=entry.tenant,
        question=entry.question,
        answer=entry.answer,
        embedding=vector,
        embedder_id=embedder_id,
        entities=entry.entities,
        expires_at=entry.expires_at,
        ttl_seconds=entry.ttl_seconds,
    )
