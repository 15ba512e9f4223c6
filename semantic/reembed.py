"""Moving the cache to another embedder without ever mixing two embedders' vectors.

The embedder id is part of the partition key (:mod:`semantic.partition`), so the
entries of a new embedder live in partitions of their own: :func:`reembed`
embeds every live stored question again with the new embedder and writes it as
a *new* entry under the new partition; the old rows are never updated in place,
so an index of the old embedder keeps serving until the switch, and a lookup
can only ever search vectors of the embedder that made its own query vector.
With ``drop_old`` each old row is deleted in the transaction that writes its new one
(:mod:`semantic.store_move`, logged, so other replicas replay both); without it the
new rows are copies, written only where the new partition lacks the question.

The partition key is a one-way hash of the tenant namespace, model, parameters
and conversation context, and an entry stores only the hash: the new key
cannot be computed from a stored row. ``rekey`` supplies it; :func:`rekey_for`
builds one from the queries whose partitions are known (what a caller that
recorded them has). An entry whose new partition is unknown is not carried
over and is counted in ``ReembedReport.no_partition``; with
``drop_old=True`` it is deleted with the rest of the old embedder's entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from tqdm import tqdm

from semantic.embedder_base import CoveringEmbedder
from semantic.embedders import MIN_COVERAGE
from semantic.fences import is_fenced
from semantic.index import check_vectors
from semantic.partition import SemanticQuery
from semantic.store import EntryStore, NewEntry, StoredEntry
from semantic.store_move import move_entries

#: (stored entry, new embedder id) -> the entry's partition key under that embedder, or None.
Rekey = Callable[[StoredEntry, str], str | None]

#: Questions embedded per call: bounds memory, keeps the progress bar moving.
REEMBED_BATCH = 64


@dataclass(frozen=True)
class ReembedReport:
    """What :func:`reembed` did; every old entry is counted in exactly one of the
    first six fields (``dropped`` counts the old rows deleted, carried or not)."""

    embedder_id: str
    written: int = 0
    kept: int = 0  # the new partition already held the question (a fresher answer)
    gone: int = 0  # deleted by someone else (an operator, a purge) while it was embedded
    expired: int = 0  # past their expiry: not carried over
    unsupported: int = 0  # the new embedder cannot represent the question (coverage floor)
    no_partition: int = 0  # rekey did not know the entry's partition
    dropped: int = 0  # old entries deleted


def rekey_for(queries: Iterable[SemanticQuery], old_embedder_id: str) -> Rekey:
    """A :data:`Rekey` for the partitions of ``queries`` (the tenant, model, parameters
    and context of each), as they were keyed under ``old_embedder_id``."""
    known = {q.partition_key(old_embedder_id): q for q in queries}

    def rekey(entry: StoredEntry, embedder_id: str) -> str | None:
        query = known.get(entry.partition_key)
        return None if query is None else query.partition_key(embedder_id)

    return rekey


def reembed(
    store: EntryStore,
    embedder: CoveringEmbedder,
    rekey: Rekey,
    *,
    source_embedder_id: str | None = None,
    drop_old: bool = True,
    now: datetime | None = None,
    min_coverage: float = MIN_COVERAGE,
    progress: bool = True,
) -> ReembedReport:
    """Write every live entry of another embedder (or of ``source_embedder_id``) again,
    embedded with ``embedder``, under its new partition; then, with ``drop_old``,
    delete the old embedder's entries. Returns the counts.

    An old row is deleted only in the transaction that writes its new one, so an
    exception (database down, embedder failure) loses nothing: the batches before it
    are moved, the rest are as they were, and running it again is safe. A question the
    new partition already holds (a backfill under the new embedder) keeps that fresher
    row; an entry deleted while it was embedded is not written again. Moved entries
    keep their times and hit counts; entries not carried over are deleted at the end.
    """
    new_id = embedder.embedder_id
    if source_embedder_id == new_id:
        raise ValueError("source and target embedder are the same")
    moment = now or datetime.now(UTC)
    counts = dict.fromkeys(("written", "kept", "gone", "dropped"), 0)
    counts |= dict.fromkeys(("expired", "unsupported", "no_partition"), 0)
    not_carried: list[int] = []
    pending: list[tuple[StoredEntry, str]] = []
    sources = store.iter_entries(embedder_id=source_embedder_id)
    total = store.count(embedder_id=source_embedder_id)
    with tqdm(total=total, desc="re-embed", unit="entry", disable=not progress) as bar:
        for entry in sources:
            bar.update(1)
            if entry.embedder_id == new_id:
                continue  # already the new embedder's: neither source nor to be dropped
            key = rekey(entry, new_id)
            if entry.is_expired(moment):
                counts["expired"] += 1
            elif embedder.coverage(entry.question) < min_coverage:
                counts["unsupported"] += 1
            elif key is None:
                counts["no_partition"] += 1
            else:
                pending.append((entry, key))
                if len(pending) >= REEMBED_BATCH:
                    _carry(store, embedder, pending, drop_old, moment, counts)
                    pending = []
                continue
            not_carried.append(entry.id)
        _carry(store, embedder, pending, drop_old, moment, counts)
    if drop_old and not_carried:
        counts["dropped"] += len(store.delete(not_carried))
    return ReembedReport(new_id, **counts)


def _carry(
    store: EntryStore,
    embedder: CoveringEmbedder,
    batch: list[tuple[StoredEntry, str]],
    drop_old: bool,
    now: datetime,
    counts: dict[str, int],
) -> None:
    """Write one batch under the new embedder. Moving (``drop_old``) deletes each old
    row and inserts its new one in one transaction (:mod:`semantic.store_move`: an entry
    deleted meanwhile is not written again, a fresher answer already in the new
    partition is kept); copying inserts only where the new partition lacks the question."""
    if not batch:
        return
    vectors = check_vectors(embedder.embed([e.question for e, _ in batch]), embedder.dim)
    carried = [
        (
            entry,
            NewEntry(
                partition_key=key,
                tenant=entry.tenant,
                question=entry.question,
                answer=entry.answer,
                embedding=vector,
                embedder_id=embedder.embedder_id,
                entities=entry.entities,
                expires_at=entry.expires_at,
                ttl_seconds=entry.ttl_seconds,
            ),
        )
        for (entry, key), vector in zip(batch, vectors, strict=True)
    ]
    written: list[StoredEntry] = []
    if drop_old:
        moved = move_entries(store, carried)
        written = list(moved.written)
        counts["kept"] += moved.kept
        counts["gone"] += len(moved.gone)
        counts["dropped"] += moved.dropped
    else:
        for _, new in carried:
            entry, created = store.upsert(new, now=now, keep_existing=True)
            if created:
                written.append(entry)
            else:
                counts["kept"] += 1
    overtaken = _overtaken(store, written, now)
    counts["written"] += len(written) - len(overtaken)
    counts["gone"] += len(overtaken)


def _overtaken(store: EntryStore, written: list[StoredEntry], read_at: datetime) -> list[int]:
    """The written entries of tenants invalidated since ``read_at``, deleted: the
    invalidation's delete could not see them (uncommitted, under the new embedder) and
    the moved old rows were gone, so the answers it meant to remove came back (a
    review, session 44; ``semantic/migrate_partition.py`` checks the same). A fence
    that cannot be read counts as invalidated: those answers are lost to the cache,
    never kept."""
    gone: list[int] = []
    for tenant in {e.tenant for e in written}:
        try:
            fenced = is_fenced(store, tenant, read_at)
        except Exception:
            fenced = True
        if fenced:
            gone += [e.id for e in written if e.tenant == tenant]
    if gone:
        store.delete(gone)
    return gone
