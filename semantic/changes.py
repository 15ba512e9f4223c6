"""The change log (table ``cache_changes``): its rows and how they are written.

Each replica keeps its FAISS indexes in memory, so a change made through one
replica must reach the others. Every write that matters to another replica (an
entry stored or removed, a partition cleared) adds rows here *in the same
transaction* as the change itself: the log cannot disagree with the data, a
rolled-back write leaves no row and a committed one always has one. On
PostgreSQL the same transaction also sends ``NOTIFY cachegate_changes``, which is
delivered only on commit, to wake the other replicas at once; it is a wake-up
only, the log is the truth.

This package writes the log and replays rows onto an index
(:mod:`semantic.replay`); reading the log, keeping a replica's position in it and
waking on notifications is the application's replica-sync feed. The application
may log rows of its own ops through :func:`log_changes` (replay ignores them).

``at`` comes from the database's clock (``clock_timestamp()``, the moment of the
insert) on PostgreSQL, so every replica compares times from one clock; SQLite is
one file on one machine, where the process clock is that clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select
from sqlalchemy.orm import Session

from semantic.models import CacheChange

#: The NOTIFY channel. Channels are per database, not per schema, so the payload
#: names the writer's schema and a feed ignores wake-ups meant for another one.
CHANNEL = "cachegate_changes"

UPSERT = "upsert"  # entry_id was inserted or updated: reload it
DELETE = "delete"  # entry_id was deleted (ids are never reused)
CLEAR_PARTITION = "clear_partition"  # entries of partition_key (of tenant, if set) deleted

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
