"""Moving the cache to another embedder without ever mixing two embedders' vectors.

The embedder id is part of the partition key (:mod:`semantic.partition`), so the
entries of a new embedder live in partitions of their own: :func:`reembed`
embeds every live stored question again with the new embedder and writes it as
a *new* entry under the new partition; the old rows are never updated in place,
so an index of the old embedder keeps serving until the switch, and a lookup
can only ever search vectors of the embedder that made its own query vector.
Only after every new entry is written are the old embedder's entries deleted
(through the store, so other replicas replay the deletes).

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
from semantic.index import check_vectors
from semantic.partition import SemanticQuery
from semantic.store import EntryStore, NewEntry, StoredEntry

#: (stored entry, new embedder id) -> the entry's partition key under that embedder, or None.
Rekey = Callable[[StoredEntry, str], str | None]

#: Questions embedded per call: bounds memory, keeps the progress bar moving.
REEMBED_BATCH = 64


@dataclass(frozen=True)
class ReembedReport:
    """What :func:`reembed` did; every old entry is counted in exactly one field."""

    embedder_id: str
    written: int = 0
    expired: int = 0  # past their expiry: not carried over
    unsupported: int = 0  # the new embedder cannot represent the question (coverage floor)
    no_partition: int = 0  # rekey did not know the entry's partition
    dropped: int = 0  # old entries deleted after the new ones were written


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

    Nothing is deleted unless every carried-over entry was written: an exception
    (database down, embedder failure) leaves the old entries as they were, and
    running it again is safe (writes are upserts on (partition, question)).
    Hit counts and creation times start afresh on the new entries.
    """
    new_id = embedder.embedder_id
    if source_embedder_id == new_id:
        raise ValueError("source and target embedder are the same")
    moment = now or datetime.now(UTC)
    counts = {"written": 0, "expired": 0, "unsupported": 0, "no_partition": 0}
    old_ids: list[int] = []
    pending: list[tuple[StoredEntry, str]] = []
    sources = store.iter_entries(embedder_id=source_embedder_id)
    total = store.count(embedder_id=source_embedder_id)
    with tqdm(total=total, desc="re-embed", unit="entry", disable=not progress) as bar:
        for entry in sources:
            bar.update(1)
            if entry.embedder_id == new_id:
                continue  # already the new embedder's: neither source nor to be dropped
            old_ids.append(entry.id)
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
                    counts["written"] += _write(store, embedder, pending, moment)
                    pending = []
        counts["written"] += _write(store, embedder, pending, moment)
    dropped = len(store.delete(old_ids)) if drop_old and old_ids else 0
    return ReembedReport(new_id, dropped=dropped, **counts)


def _write(
    store: EntryStore,
    embedder: CoveringEmbedder,
    batch: list[tuple[StoredEntry, str]],
    now: datetime,
) -> int:
    if not batch:
        return 0
    vectors = check_vectors(embedder.embed([e.question for e, _ in batch]), embedder.dim)
    for (entry, key), vector in zip(batch, vectors, strict=True):
        store.upsert(
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
            now=now,
        )
    return len(batch)
