"""The change log as the replica-sync feed reads it, and the gateway's own rows.

The log (``cache_changes``) is written by :mod:`semantic.changes` in the
transaction of each semantic change; the gateway adds ``tenant`` rows in the
transaction of each tenant, key or policy write (:func:`log_tenant_change`).
Reading is the feed's business only (:mod:`gateway.sync.feed`): the position
(:func:`last_seq`), what is new (:func:`read_after`), what may have committed
late (:func:`read_missed`), the shared clock (:func:`db_now`) and pruning.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, func, select, text
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


#: Up to this many seqs go into one ``IN`` list (SQLite before 3.32 takes 999 bound
#: parameters); more are read as the range they span, filtered here.
IN_LIST_MAX = 500


def read_missed(
    conn: Connection, floor: int | None, gaps: Sequence[int], since: datetime
) -> list[Change]:
    """Rows that may have committed after a reader passed their sequence number,
    written since ``since``, oldest first: every row at or below ``floor`` (when the
    reader does not know which it has), and those of ``gaps`` (sorted, above it)."""
    recent = CacheChange.at >= since
    below = [] if floor is None else _changes(conn, CacheChange.seq <= floor, recent)
    if not gaps:
        return below
    if len(gaps) <= IN_LIST_MAX:
        return below + _changes(conn, CacheChange.seq.in_(gaps), recent)
    wanted = set(gaps)
    spanned = _changes(conn, CacheChange.seq.between(gaps[0], gaps[-1]), recent)
    return below + [c for c in spanned if c.seq in wanted]


def last_seq(conn: Connection) -> int:
    return int(conn.execute(select(func.coalesce(func.max(CacheChange.seq), 0))).scalar_one())


def written_at(conn: Connection, seq: int) -> datetime | None:
    """When the row ``seq`` was logged; None when there is none (pruned, or not yet)."""
    found: datetime | None = conn.execute(
        select(CacheChange.at).where(CacheChange.seq == seq)
    ).scalar()
    return found


def sequence_head(conn: Connection) -> int:
    """The highest seq the log has ever handed out (pruning never lowers it; 0 before the
    first). Below a replica's position only when the database went back in time: a
    restore to an earlier point, or a failover to a standby that lost the last commits."""
    if is_postgres(conn):
        name = conn.execute(text("SELECT pg_get_serial_sequence('cache_changes', 'seq')"))
        sequence = name.scalar_one()
        if sequence is None:  # an identity column by another name: the rows must do
            return last_seq(conn)
        row = conn.execute(text(f"SELECT last_value, is_called FROM {sequence}")).one()
        return int(row.last_value) if row.is_called else 0
    found = conn.execute(text("SELECT seq FROM sqlite_sequence WHERE name = 'cache_changes'"))
    return int(found.scalar() or 0)


def prune(conn: Connection, before: datetime) -> int:
    """Delete rows written before ``before``; returns how many."""
    result = conn.execute(delete(CacheChange).where(CacheChange.at < before))
    return int(result.rowcount or 0)
