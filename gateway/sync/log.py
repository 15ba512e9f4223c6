"""The change log as the replica-sync feed reads it, and the gateway's own rows.

The log (``cache_changes``) is written by :mod:`semantic.changes` in the
transaction of each semantic change; the gateway adds ``tenant`` rows in the
transaction of each tenant, key or policy write (:func:`log_tenant_change`).
Reading is the feed's business only (:mod:`gateway.sync.feed`): the position
(:func:`last_seq`), what is new (:func:`read_after`), what may have committed
late (:func:`read_late`), the shared clock (:func:`db_now`) and pruning.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, func, select
from sqlalchemy.orm import Session

from semantic.changes import Change, NewChange, is_postgres, log_changes
from semantic.models import CacheChange

TENANT = "tenant"  # a tenant's keys, policy or state changed: drop cached auth


def log_tenant_change(session: Session, tenant_id: str) -> None:
    """The tenant's keys, policy or state changed: every replica drops its auth cache."""
    log_changes(session, [NewChange(TENANT, tenant=tenant_id)])


def changed_tenants(changes: Iterable[Change]) -> frozenset[str]:
    """The tenants named by ``tenant`` rows among ``changes``."""
    return frozenset(c.tenant for c in changes if c.op == TENANT and c.tenant)


def db_now(executor: Session | Connection) -> datetime:
    """The clock every replica shares: the database's on PostgreSQL."""
    if is_postgres(executor):
        value = executor.execute(select(func.clock_timestamp())).scalar_one()
        return value if isinstance(value, datetime) else datetime.now(UTC)
    return datetime.now(UTC)


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
