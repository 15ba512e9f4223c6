"""Reloading the in-memory partition indexes from the entry store (at start-up, and
when the change feed has lost track of the log while serving).

The database is the source of truth; each process rebuilds its FAISS indexes
from it. Only entries written with the current embedder are loaded (another
embedder's vectors live in another space), expired ones are purged first, and a
row with an unusable vector is skipped with a warning: one corrupt row must not
stop the start-up.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

import numpy as np
from numpy.typing import NDArray
from tqdm import tqdm

from semantic.partitioned_index import PartitionedIndex
from semantic.store import EntryStore

logger = logging.getLogger(__name__)

#: Entries added to the index per batch: bounds the vectors held before adding them.
REBUILD_BATCH = 1000

#: Without a progress bar (a rebuild the change feed starts while serving, in a
#: background thread), a log line this often says how far it has come.
PROGRESS_LOG_SECONDS = 10.0

_Pending = dict[str, tuple[list[int], list[NDArray[np.float32]]]]


def rebuild_index(
    entries: EntryStore,
    index: PartitionedIndex,
    embedder_id: str,
    now: datetime,
    *,
    progress: bool = True,
) -> int:
    """Load every live entry of ``embedder_id`` into ``index`` in place of what it held;
    returns the number of entries indexed. The caller holds the cache's write lock.

    The new partitions are built on the side and swapped in at the end, so lookups keep
    searching the old ones meanwhile (a rebuild while serving, after a long outage of
    the change feed, took minutes at a million rows with every lookup a miss). The
    price: both sets of vectors are held until the swap (~1.5 GB each at a million
    384-wide entries)."""
    dim = index.dim
    entries.purge_expired(now)
    total = entries.count(embedder_id=embedder_id)
    built = index.empty_like()
    pending: _Pending = {}
    skipped = 0
    started = logged = time.monotonic()
    if not progress:
        logger.info("semantic index: rebuilding from %d entries", total)
    with tqdm(total=total, desc="semantic index", unit="entry", disable=not progress) as bar:
        for count, entry in enumerate(entries.iter_entries(embedder_id=embedder_id), start=1):
            if not progress and time.monotonic() - logged >= PROGRESS_LOG_SECONDS:
                logged = time.monotonic()
                logger.info("semantic index: %d of %d entries read", count - 1, total)
            vec = entry.embedding
            if vec.shape != (dim,) or not np.isfinite(vec).all() or not vec.any():
                skipped += 1
            elif not entry.is_expired(now):
                ids, vecs = pending.setdefault(entry.partition_key, ([], []))
                ids.append(entry.id)
                vecs.append(vec)
            if count % REBUILD_BATCH == 0:
                _flush(built, pending)
            bar.update(1)
        _flush(built, pending)
    index.take_from(built)
    if skipped:
        logger.warning("semantic: skipped %d entries with unusable embeddings", skipped)
    if not progress:
        elapsed = time.monotonic() - started
        logger.info("semantic index: %d entries indexed in %.1f s", len(index), elapsed)
    return len(index)


def _flush(index: PartitionedIndex, pending: _Pending) -> None:
    for key, (ids, vecs) in pending.items():
        index.add(key, ids, np.stack(vecs))
    pending.clear()
