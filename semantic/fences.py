"""Invalidation fences: an answer computed before its tenant's cache was invalidated
is never kept.

An admin invalidation deletes a tenant's entries. A request whose lookup missed just
before it, still waiting for the model, used to store its answer just after it, and
that answer was then served until its TTL: the very answer the operator meant to
remove (``DELETE /admin/tenants/{id}/cache``, a partition or an entry, after the
source of an answer changed).
So an invalidation first commits a fence, the tenant's time of invalidation
(:func:`raise_fence`), and only then deletes; a store of a question asked before the
fence (:func:`is_fenced`, read after the entry's own commit) deletes what it wrote.

Reading the fence after the entry commits covers both orders without a lock, on every
replica: if the read comes before the fence's commit, the entry committed before the
invalidation's delete began, which removes it; if after, the store sees the fence and
removes the entry itself. Times are the replicas' clocks, so a question asked up to
``FENCE_MARGIN`` after the fence counts as before it: a few answers more go unstored
after an invalidation, never one from before it kept.

A database blip can fail both the fence read and the delete that stands in for it,
after the entry committed: such an entry is kept in :class:`Unsettled` (in memory,
never in this replica's index) and settled by the cache's next write or its close:
the fence read again, the entry deleted if an invalidation overtook it. The caller
may add its own question (``Stored.is_orphan``: the gateway asks whether the tenant
that wrote the entry is still the one of that id, when its check after the commit
could not be read either).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from semantic.models import CacheFence
from semantic.store import EntryStore
from semantic.store_db import unavailable_on_db_errors

log = logging.getLogger("cachegate.semantic")

#: How far apart the replicas' clocks may be (NTP keeps them within milliseconds).
FENCE_MARGIN = timedelta(seconds=5)

#: How many unsettled entries are kept; past it the oldest is forgotten (logged): a
#: database away that long fails the upserts before them too, so it is not reached.
MAX_UNSETTLED = 10_000


def raise_fence(store: EntryStore, tenant: str, at: datetime) -> None:
    """Record that ``tenant``'s cache is invalidated as of ``at`` (committed on return:
    call it before deleting the entries)."""
    dialect = store.engine.dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(CacheFence).values(tenant=tenant, fenced_at=at)
    statement = statement.on_conflict_do_update(
        index_elements=[CacheFence.tenant], set_={"fenced_at": at}
    )
    with unavailable_on_db_errors(store.url), Session(store.engine) as session, session.begin():
        session.execute(statement)


def is_fenced(store: EntryStore, tenant: str, asked_at: datetime) -> bool:
    """Whether ``tenant``'s cache was invalidated since ``asked_at`` (less the margin),
    so that an answer to a question asked then must not be kept."""
    statement = select(CacheFence.fenced_at).where(CacheFence.tenant == tenant)
    with unavailable_on_db_errors(store.url), Session(store.engine) as session:
        fenced_at = session.scalar(statement)
    return fenced_at is not None and fenced_at >= asked_at - FENCE_MARGIN


class Stored(NamedTuple):
    """An entry whose fence was never read: the question's tenant and time;
    ``is_orphan``, when given, says (or raises, the database still away) whether its
    writer is gone, which deletes it too."""

    tenant: str
    asked_at: datetime | None
    entry_id: int
    partition_key: str = ""
    is_orphan: Callable[[], bool] | None = None


class Unsettled:
    """Entries committed whose fence could be neither read nor stood in for by a delete
    (one database blip failing both): unknown whether an invalidation overtook them."""

    def __init__(self) -> None:
        self._entries: dict[int, Stored] = {}
        self._lock = threading.Lock()
        # One settle at a time: a second caller goes on (the next write settles the rest)
        # rather than wait behind a database that hangs.
        self._settling = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, stored: Stored) -> None:
        with self._lock:
            self._entries[stored.entry_id] = stored
            if len(self._entries) > MAX_UNSETTLED:
                oldest = next(iter(self._entries))
                del self._entries[oldest]
                log.error("unsettled entry %d forgotten: over %d kept", oldest, MAX_UNSETTLED)

    def ids(self) -> set[int]:
        with self._lock:
            return set(self._entries)

    def indexed(self) -> list[tuple[int, str]]:
        """``(entry id, partition key)`` of each: what a rebuild must not index."""
        with self._lock:
            return [(s.entry_id, s.partition_key) for s in self._entries.values()]

    def settle(self, store: EntryStore) -> list[tuple[int, str]]:
        """Read each entry's fence again; delete those an invalidation overtook (or whose
        writer is gone) and return what was deleted (for the caller's index). The first
        failure stops it (the database is still away): the rest wait for the next call,
        as they do while another caller is settling."""
        if not self._settling.acquire(blocking=False):
            return []
        try:
            with self._lock:
                pending = list(self._entries.values())
            deleted: list[tuple[int, str]] = []
            for stored in pending:
                try:
                    if _overtaken(store, stored):
                        deleted.extend(store.delete([stored.entry_id]))
                except Exception:
                    break  # the database is still away: the rest wait too
                with self._lock:
                    self._entries.pop(stored.entry_id, None)
            return deleted
        finally:
            self._settling.release()


def _overtaken(store: EntryStore, stored: Stored) -> bool:
    fenced = stored.asked_at is not None and is_fenced(store, stored.tenant, stored.asked_at)
    return fenced or (stored.is_orphan is not None and stored.is_orphan())


def withdraw(store: EntryStore, unsettled: Unsettled, stored: Stored) -> None:
    """Delete an entry just stored whose writer could not be confirmed (the gateway's
    tenant check after the commit failed); when that delete fails too, keep it in
    ``unsettled``, settled once ``stored.is_orphan`` answers, and let the error go on."""
    try:
        store.delete([stored.entry_id])
    except Exception:
        unsettled.add(stored)
        log.error("entry %d: its delete failed; kept out of the index", stored.entry_id)
        raise


def drop_if_overtaken(
    store: EntryStore,
    tenant: str,
    asked_at: datetime | None,
    entry_id: int,
    unsettled: Unsettled | None = None,
    partition_key: str = "",
) -> list[tuple[int, str]] | None:
    """After a store of an answer to a question asked at ``asked_at``: when the fence
    says an invalidation overtook it, delete the entry and return what was deleted
    (for the caller's index); else None. A fence that cannot be read deletes the entry
    too (best effort: the database may be away) before the error goes on, for no sweep
    would find an answer an invalidation meant to remove (a review, session 41); when
    that delete fails too, the entry goes to ``unsettled``, settled later.
    Without ``asked_at`` (a seed, a migration: no request) nothing is checked."""
    if asked_at is None:
        return None
    try:
        fenced = is_fenced(store, tenant, asked_at)
    except Exception:
        try:
            store.delete([entry_id])
        except Exception:
            if unsettled is not None:
                unsettled.add(Stored(tenant, asked_at, entry_id, partition_key))
                log.error("entry %d: neither its fence nor its delete went through", entry_id)
        raise
    return store.delete([entry_id]) if fenced else None
