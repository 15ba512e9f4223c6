"""The change log (table ``cache_changes``): written with every change, read by replicas.

Each replica keeps its FAISS indexes and its tenant cache in memory, so a change
made through one replica must reach the others. Every write that matters to
another replica (an entry stored or removed, a partition cleared, a tenant's
keys, policy or state changed) adds rows here *in the same transaction* as the
change itself: the log cannot disagree with the data, a rolled-back write leaves
no row and a committed one always has one. On PostgreSQL the same transaction
also sends ``NOTIFY cachegate_changes``, which is delivered only on commit, to
wake the other replicas' feeds at once; it is a wake-up only, the log is the
truth (:mod:`semantic.sync` explains why this, not Redis pub/sub).

``at`` comes from the database's clock (``clock_timestamp()``, the moment of the
insert) on PostgreSQL, so every replica compares times from one clock; SQLite is
one file on one machine, where the process clock is that clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.orm import Session

from semantic.models import CacheChange

#: The NOTIFY channel. Channels are per database, not per schema, so the payload
#: names the writer's schema and a feed ignores wake-ups meant for another one.
CHANNEL = "cachegate_changes"

UPSERT = "upsert"  # entry_id was inserted or updated: reload it
DELETE = "delete"  # entry_id was deleted (ids are never reused)
CLEAR_PARTITION = "clear_partition"  # entries of partition_key (of tenant, if set) deleted
TENANT = "tenant"  # a tenant's keys, policy or state changed: drop cached auth

_Executor = Session | Connection


@dataclass(frozen=True)
class NewChange:
    """A row to log; the database assigns ``seq`` and ``at``."""

    op: str
    partition_key: str | None = None
    entry_id: int | None = None
    tenant: str | None = None


@dataclass(frozen=True)
class Change:
    """A logged row, as a feed reads it."""

    seq: int
    at: datetime
    op: str
    partition_key: str | None
    entry_id: int | None
    tenant: str | None


def is_postgres(executor: _Executor) -> bool:
    bind = executor.get_bind() if isinstance(executor, Session) else executor
    return bind.dialect.name == "postgresql"


def db_now(executor: _Executor) -> datetime:
    """The clock every replica shares: the database's on PostgreSQL."""
    if is_postgres(executor):
        value = executor.execute(select(func.clock_timestamp())).scalar_one()
        return value if isinstance(value, datetime) else datetime.now(UTC)
    return datetime.now(UTC)


def log_changes(session: Session, changes: Iterable[NewChange]) -> None:
    """Add ``changes`` to ``session``'s transaction (and queue the NOTIFY on PostgreSQL).

    Call it last in the transaction, just before the commit: ``at`` is read here,
    and the closer it is to the commit the safer a reader's overlap window is.
    """
    rows: list[dict[str, Any]] = [
        {"op": c.op, "partition_key": c.partition_key, "entry_id": c.entry_id, "tenant": c.tenant}
        for c in changes
    ]
    if not rows:
        return
    if is_postgres(session):
        # One round trip: the insert time and the wake-up (queued until commit;
        # duplicates within one transaction are folded into one by PostgreSQL).
        payload = func.coalesce(func.current_schema(), "")
        at = session.execute(
            select(func.clock_timestamp(), func.pg_notify(CHANNEL, payload))
        ).one()[0]
    else:
        at = datetime.now(UTC)
    session.execute(insert(CacheChange), [row | {"at": at} for row in rows])


def log_tenant_change(session: Session, tenant_id: str) -> None:
    """The tenant's keys, policy or state changed: every replica drops its auth cache."""
    log_changes(session, [NewChange(TENANT, tenant=tenant_id)])


def _changes(conn: Connection, *where: Any, limit: int | None = None) -> list[Change]:
    statement = select(
        CacheChange.seq,
        CacheChange.at,
        CacheChange.op,
        CacheChange.partition_key,
        CacheChange.entry_id,
        CacheChange.tenant,
    ).where(*where)
    statement = statement.order_by(CacheChange.seq).limit(limit)
    return [Change(*row) for row in conn.execute(statement)]


def read_after(conn: Connection, seq: int, limit: int) -> list[Change]:
    """Rows past ``seq``, oldest first, at most ``limit``."""
    return _changes(conn, CacheChange.seq > seq, limit=limit)


def read_late(conn: Connection, seq: int, since: datetime) -> list[Change]:
    """Rows at or below ``seq`` written since ``since``: the ones that may have
    committed after a reader had already passed their sequence number."""
    return _changes(conn, CacheChange.seq <= seq, CacheChange.at >= since)


def last_seq(conn: Connection) -> int:
    return int(conn.execute(select(func.coalesce(func.max(CacheChange.seq), 0))).scalar_one())


def prune(conn: Connection, before: datetime) -> int:
    """Delete rows written before ``before``; returns how many."""
    result = conn.execute(delete(CacheChange).where(CacheChange.at < before))
    return int(result.rowcount or 0)
