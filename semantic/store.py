"""Persistent cache entries: SQLAlchemy 2 over SQLite (default) or PostgreSQL.

The database is the source of truth; the FAISS indexes are rebuilt from it at
start-up. Every method returns plain :class:`StoredEntry` values (never ORM
objects bound to a session), so results can cross threads freely.

Errors: a database that cannot be reached, times out, or has no schema yet
raises :class:`~semantic.errors.StoreUnavailableError` (the gateway fails open);
anything else from the database is a bug and propagates unchanged.

The schema is created and changed only by the application's Alembic migrations;
this package never runs them (a missing schema is reported, not created).

Every write also logs what it changed (:mod:`semantic.changes`) in its own
transaction, so other replicas can replay it (:mod:`semantic.replay`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, cast

import numpy as np
from sqlalchemy import Table, bindparam, delete, func, select, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from semantic.changes import CLEAR_PARTITION, DELETE, UPSERT, NewChange, log_changes
from semantic.entries import TABLE, NewEntry, StoredEntry, row_to_entry, to_entry
from semantic.entry_memo import DEFAULT_MEMO_SECONDS, DEFAULT_MEMO_SIZE, EntryMemo
from semantic.errors import EntryNotFoundError, WouldBlockError
from semantic.hit_counter import PendingHits
from semantic.models import SemanticEntry
from semantic.question import normalize_question, question_digest
from semantic.store_db import (
    HIT_READ_TIMEOUT_MS,
    is_deadlock,
    make_engine,
    unavailable_on_db_errors,
)
from semantic.store_sizes import SizeQueries

__all__ = ["DEFAULT_URL", "EntryStore", "NewEntry", "StoredEntry"]

#: A SQLite file in the working directory: embedded, zero set-up.
DEFAULT_URL = "sqlite:///cachegate.db"

_CHUNK = 500  # ids per IN (...) clause; SQLite allows 32k parameters, keep statements small


_GET_MANY = select(*TABLE.columns).where(TABLE.c.id.in_(bindparam("ids", expanding=True)))


def _deletes(removed: Iterable[tuple[int, str]]) -> list[NewChange]:
    return [NewChange(DELETE, partition_key, entry_id) for entry_id, partition_key in removed]


class EntryStore(SizeQueries):
    """CRUD for cache entries; one instance per process, shared by threads."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        connect_timeout: float = 5.0,
        memo_size: int = DEFAULT_MEMO_SIZE,
        memo_seconds: float = DEFAULT_MEMO_SECONDS,
    ) -> None:
        self.url = make_url(url).render_as_string(hide_password=True)
        self.engine = make_engine(url, connect_timeout=connect_timeout)
        # The hit path's reads (get_many) are bounded on PostgreSQL (HIT_READ_TIMEOUT_MS)
        # through a pool of their own; SQLite has no server to be stuck.
        self.read_engine = self.engine
        if self.engine.dialect.name == "postgresql":
            self.read_engine = make_engine(
                url, connect_timeout=connect_timeout, statement_timeout_ms=HIT_READ_TIMEOUT_MS
            )
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # Rows the hit path read recently (semantic/entry_memo.py); every write here
        # forgets what it touched after its commit. size 0: every read goes to the database.
        self.memo = EntryMemo(memo_size, memo_seconds)

    def __repr__(self) -> str:
        return f"EntryStore({self.url!r})"

    def _session(self) -> Session:
        return self._sessions()

    def close(self) -> None:
        self.engine.dispose()
        if self.read_engine is not self.engine:
            self.read_engine.dispose()

    def ping(self) -> None:
        """Raise :class:`StoreUnavailableError` unless the table can be queried."""
        self.count()

    def has_question(self, partition_key: str, question: str) -> bool:
        """Whether the partition holds this question (normalized): storing it again is an
        update, which needs no room under the tenant's bounds."""
        digest = question_digest(normalize_question(question))
        statement = select(SemanticEntry.id).where(
            SemanticEntry.partition_key == partition_key, SemanticEntry.question_digest == digest
        )
        with unavailable_on_db_errors(self.url), self._session() as session:
            return session.scalar(statement.limit(1)) is not None

    # -- writes ------------------------------------------------------------------
    def upsert(
        self, entry: NewEntry, *, now: datetime, keep_existing: bool = False
    ) -> tuple[StoredEntry, bool]:
        """Insert, or update the row with the same (partition, normalized question);
        with ``keep_existing``, leave such a row as it is (a copy must not overwrite a
        fresher answer).

        Returns the stored entry and whether it was created. A concurrent insert
        of the same question (another replica) loses the unique-constraint race
        and is retried once as an update.
        """
        for moment in (now, entry.expires_at):
            if moment is not None and moment.tzinfo is None:
                raise ValueError("naive datetime: pass an aware (UTC) datetime")
        normalized = normalize_question(entry.question)
        digest = question_digest(normalized)
        embedding = np.ascontiguousarray(entry.embedding, dtype="<f4").tobytes()
        with unavailable_on_db_errors(self.url):
            for attempt in range(3):  # a unique race, a deadlock's loss, then its race
                try:
                    with self._session() as session, session.begin():
                        row = session.scalars(
                            select(SemanticEntry).where(
                                SemanticEntry.partition_key == entry.partition_key,
                                SemanticEntry.question_digest == digest,
                            )
                        ).one_or_none()
                        created = row is None
                        if row is not None and keep_existing:
                            return to_entry(row), False
                        if row is None:
                            row = SemanticEntry(
                                partition_key=entry.partition_key,
                                question_digest=digest,
                                created_at=now,
                                hit_count=0,
                            )
                            session.add(row)
                        row.tenant = entry.tenant
                        row.question = entry.question
                        row.normalized_question = normalized
                        row.answer = entry.answer
                        row.embedding = embedding
                        row.embedder_id = entry.embedder_id
                        row.entities = entry.entities
                        row.expires_at = entry.expires_at
                        row.ttl_seconds = entry.ttl_seconds
                        row.updated_at = now
                        session.flush()
                        change = NewChange(UPSERT, entry.partition_key, row.id, entry.tenant)
                        log_changes(session, [change])
                        stored = to_entry(row)
                    self.memo.forget([stored.id])  # after the commit: see EntryMemo.put
                    return stored, created
                except (sa_exc.IntegrityError, StaleDataError):
                    # a unique race; or the row read was deleted (another replica's
                    # invalidation) before its update: run again, inserting it anew
                    if attempt == 2:
                        raise
                except sa_exc.OperationalError as exc:  # a deadlock's loser: run again
                    if attempt == 2 or not is_deadlock(exc):
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    def record_hit(
        self, entry_id: int, *, at: datetime, expires_at: datetime | None = None
    ) -> None:
        """Count a hit atomically (``hit_count + 1`` in SQL); optionally move the expiry."""
        values: dict[str, Any] = {"hit_count": SemanticEntry.hit_count + 1, "last_hit_at": at}
        if expires_at is not None:
            values["expires_at"] = expires_at
        with unavailable_on_db_errors(self.url), self._session() as session, session.begin():
            session.execute(
                update(SemanticEntry).where(SemanticEntry.id == entry_id).values(values)
            )
        if expires_at is not None:
            self.memo.forget([entry_id])

    def record_hits(self, hits: Mapping[int, PendingHits]) -> None:
        """Write a batch of counted hits (:mod:`semantic.hit_counter`) in one transaction:
        ``hit_count + n`` in SQL, the latest hit time, and the slid expiry where one is given.
        Entries deleted meanwhile are skipped (their UPDATE matches no row)."""
        if not hits:
            return
        table = cast(Table, SemanticEntry.__table__)
        statement = (
            update(table)
            .where(table.c.id == bindparam("b_id"))
            .values(
                hit_count=table.c.hit_count + bindparam("b_n"),
                last_hit_at=bindparam("b_at", type_=table.c.last_hit_at.type),
                expires_at=func.coalesce(
                    bindparam("b_exp", type_=table.c.expires_at.type), table.c.expires_at
                ),
            )
        )
        rows = [
            {"b_id": entry_id, "b_n": h.count, "b_at": h.last_hit_at, "b_exp": h.expires_at}
            for entry_id, h in sorted(hits.items())  # one lock order for every writer
        ]
        with unavailable_on_db_errors(self.url), self.engine.begin() as conn:
            conn.execute(statement, rows)
        self.memo.forget(i for i, h in hits.items() if h.expires_at is not None)

    def delete(
        self, ids: Iterable[int], *, expired_at: datetime | None = None
    ) -> list[tuple[int, str]]:
        """Delete entries by id; returns ``(id, partition_key)`` of those deleted.

        With ``expired_at``, only rows still expired at that time are deleted, so
        a lazy expiry cannot remove an entry that a backfill has just refreshed.
        """
        id_list = [int(i) for i in ids]
        removed: list[tuple[int, str]] = []
        with unavailable_on_db_errors(self.url), self._session() as session, session.begin():
            for start in range(0, len(id_list), _CHUNK):
                statement = delete(SemanticEntry).where(
                    SemanticEntry.id.in_(id_list[start : start + _CHUNK])
                )
                if expired_at is not None:
                    statement = statement.where(
                        SemanticEntry.expires_at.is_not(None),
                        SemanticEntry.expires_at <= expired_at,
                    )
                result = session.execute(
                    statement.returning(SemanticEntry.id, SemanticEntry.partition_key)
                )
                removed.extend((int(i), str(p)) for i, p in result)
            log_changes(session, _deletes(removed))
        self.memo.forget(i for i, _ in removed)
        return removed

    def delete_where(
        self, *, partition_key: str | None = None, tenant: str | None = None
    ) -> list[tuple[int, str]]:
        """Delete every entry of a partition and/or tenant; returns ``(id, partition_key)``."""
        if partition_key is None and tenant is None:
            raise ValueError("delete_where needs partition_key and/or tenant")
        statement = delete(SemanticEntry)
        if partition_key is not None:
            statement = statement.where(SemanticEntry.partition_key == partition_key)
        if tenant is not None:
            statement = statement.where(SemanticEntry.tenant == tenant)
        with unavailable_on_db_errors(self.url), self._session() as session, session.begin():
            result = session.execute(
                statement.returning(SemanticEntry.id, SemanticEntry.partition_key)
            )
            removed = [(int(i), str(p)) for i, p in result]
            # One row per partition touched, however many entries it held; a replica
            # replaying it drops whatever that partition no longer has in the database.
            partitions = sorted({p for _, p in removed})
            log_changes(session, [NewChange(CLEAR_PARTITION, p, tenant=tenant) for p in partitions])
        self.memo.forget(i for i, _ in removed)
        return removed

    def purge_expired(self, now: datetime, tenant: str | None = None) -> list[tuple[int, str]]:
        """Delete entries whose expiry has passed (of one ``tenant``, or all); returns
        ``(id, partition_key)``."""
        statement = delete(SemanticEntry).where(
            SemanticEntry.expires_at.is_not(None), SemanticEntry.expires_at <= now
        )
        if tenant is not None:
            statement = statement.where(SemanticEntry.tenant == tenant)
        with unavailable_on_db_errors(self.url), self._session() as session, session.begin():
            result = session.execute(
                statement.returning(SemanticEntry.id, SemanticEntry.partition_key)
            )
            removed = [(int(i), str(p)) for i, p in result]
            log_changes(session, _deletes(removed))
        self.memo.forget(i for i, _ in removed)
        return removed

    # -- reads -------------------------------------------------------------------
    def ids_in_partition(self, partition_key: str) -> set[int]:
        """The ids the database holds for one partition (what a replica's index may keep)."""
        statement = select(SemanticEntry.id).where(SemanticEntry.partition_key == partition_key)
        with unavailable_on_db_errors(self.url), self._session() as session:
            return {int(i) for i in session.scalars(statement)}

    def get(self, entry_id: int) -> StoredEntry:
        found = self.get_many([entry_id])
        if entry_id not in found:
            raise EntryNotFoundError(f"no semantic cache entry {entry_id}")
        return found[entry_id]

    def get_many(
        self, ids: Iterable[int], *, recent_at: datetime | None = None, local_only: bool = False
    ) -> dict[int, StoredEntry]:
        """The rows with these ids (missing ids are absent). The hit path's one read:
        a Core statement built once (SQLAlchemy caches its compiled form), no ORM
        session or identity map, rows straight into :class:`StoredEntry`.

        With ``recent_at`` (the hit path's clock), rows the memo holds fresh and
        unexpired at that time are not read again, and those read are kept there
        (:mod:`semantic.entry_memo`); without it, every row comes from the database.
        ``local_only`` (with ``recent_at``): ``WouldBlockError`` rather than a read."""
        id_list = [int(i) for i in ids]
        out: dict[int, StoredEntry] = {}
        if not id_list:
            return out
        memo = self.memo if recent_at is not None and self.memo.is_enabled else None
        if memo is not None:
            assert recent_at is not None
            out, id_list = memo.get(id_list, recent_at)
            if not id_list:
                return out
            generation = memo.generation()
        if local_only:
            raise WouldBlockError("rows must be read from the database", reason="store")
        read: dict[int, StoredEntry] = {}
        with unavailable_on_db_errors(self.url), self.read_engine.connect() as conn:
            for start in range(0, len(id_list), _CHUNK):
                rows = conn.execute(_GET_MANY, {"ids": id_list[start : start + _CHUNK]})
                read.update((row.id, row_to_entry(row._mapping)) for row in rows)
        if memo is not None:
            memo.put(read.values(), generation)
        out.update(read)
        return out

    def count(
        self,
        *,
        partition_key: str | None = None,
        tenant: str | None = None,
        embedder_id: str | None = None,
    ) -> int:
        statement = select(func.count()).select_from(SemanticEntry)
        if partition_key is not None:
            statement = statement.where(SemanticEntry.partition_key == partition_key)
        if tenant is not None:
            statement = statement.where(SemanticEntry.tenant == tenant)
        if embedder_id is not None:
            statement = statement.where(SemanticEntry.embedder_id == embedder_id)
        with unavailable_on_db_errors(self.url), self._session() as session:
            return int(session.scalar(statement) or 0)

    def partitions_by_embedder(self, now: datetime, other_than: str) -> dict[str, set[str]]:
        """Embedder id -> the keys of its partitions that hold a live row at ``now``, for
        every embedder but ``other_than`` (the one in force: a deployment that never
        switched reads nothing here)."""
        live = (SemanticEntry.expires_at.is_(None)) | (SemanticEntry.expires_at > now)
        statement = (
            select(SemanticEntry.embedder_id, SemanticEntry.partition_key)
            .where(live, SemanticEntry.embedder_id != other_than)
            .distinct()
        )
        out: dict[str, set[str]] = {}
        with unavailable_on_db_errors(self.url), self._session() as session:
            for embedder_id, key in session.execute(statement):
                out.setdefault(str(embedder_id), set()).add(str(key))
        return out

    def iter_entries(
        self, *, embedder_id: str | None = None, batch_size: int = 1000
    ) -> Iterator[StoredEntry]:
        """All entries (of one embedder) in id order, fetched in keyset-paginated batches."""
        last_id = -1
        while True:
            statement = select(SemanticEntry).where(SemanticEntry.id > last_id)
            if embedder_id is not None:
                statement = statement.where(SemanticEntry.embedder_id == embedder_id)
            statement = statement.order_by(SemanticEntry.id).limit(batch_size)
            with unavailable_on_db_errors(self.url), self._session() as session:
                batch = [to_entry(row) for row in session.scalars(statement)]
            if not batch:
                return
            yield from batch
            last_id = batch[-1].id
