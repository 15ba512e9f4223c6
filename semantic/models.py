"""The semantic package's tables (SQLAlchemy 2 declarative): ``semantic_entries``,
the cache itself, and ``cache_changes``, the change log that replicas replay to
keep their in-memory indexes in step (:mod:`semantic.changes`, :mod:`semantic.replay`).

``Base`` has its own ``MetaData``; the gateway declares its tables on its own
base, and the single Alembic history in ``migrations/`` covers both (its
``env.py`` lists every metadata). Schema changes go through a new migration,
never ``create_all``.

Timestamps are timezone-aware UTC on the Python side on every backend
(:class:`UTCDateTime`): PostgreSQL stores ``timestamptz``; SQLite has no time
zones, so UTC is stored naive and marked UTC again when read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Dialect,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Explicit constraint names, so migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base of the semantic package's tables."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out; naive datetimes are refused on the way in."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: pass an aware (UTC) datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# SQLite only auto-increments an INTEGER PRIMARY KEY; elsewhere ids are 64-bit (faiss ids).
EntryId = BigInteger().with_variant(Integer(), "sqlite")


class SemanticEntry(Base):
    """One cached question and its answer, in one partition."""

    __tablename__ = "semantic_entries"
    __table_args__ = (
        # Idempotent backfill: one row per (partition, normalized question). This
        # unique index also serves every lookup by partition_key (its first column).
        UniqueConstraint("partition_key", "question_digest"),
        # Never reuse a deleted id on SQLite: another process's in-memory index
        # may still hold it (PostgreSQL sequences never reuse ids anyway).
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(EntryId, primary_key=True, autoincrement=True)
    partition_key: Mapped[str] = mapped_column(String(64))
    tenant: Mapped[str] = mapped_column(String(255), index=True)
    question: Mapped[str] = mapped_column(Text)
    normalized_question: Mapped[str] = mapped_column(Text)
    question_digest: Mapped[str] = mapped_column(String(64))  # sha256(normalized_question)
    answer: Mapped[dict[str, Any]] = mapped_column(JSON)  # the whole response body
    embedding: Mapped[bytes] = mapped_column(LargeBinary)  # float32, little-endian, dim values
    embedder_id: Mapped[str] = mapped_column(String(255), index=True)
    entities: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True, index=True)
    ttl_seconds: Mapped[int | None] = mapped_column(Integer, nullable=True)  # for sliding TTL
    hit_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_hit_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class CacheChange(Base):
    """One change another replica must replay: written in the transaction of the change.

    ``op`` is ``upsert``/``delete`` (``entry_id`` set), ``clear_partition``
    (``partition_key`` set; ``tenant`` when the clear was narrowed to one tenant)
    or an op the application logs for itself (``tenant``: a tenant's keys,
    policy or state changed). ``at`` is the database's clock at the insert;
    replicas re-read a window of it because sequence numbers are handed out
    before commit (the application's replica-sync feed reads the log).
    """

    __tablename__ = "cache_changes"
    # Never reuse a pruned seq on SQLite: a replica's position would skip new rows.
    __table_args__ = ({"sqlite_autoincrement": True},)

    seq: Mapped[int] = mapped_column(EntryId, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    op: Mapped[str] = mapped_column(String(16))
    partition_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    entry_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    tenant: Mapped[str | None] = mapped_column(String(255), nullable=True)


class CacheFence(Base):
    """When a tenant's cache was last invalidated (:mod:`semantic.fences`): an answer to
    a question asked before it is not kept."""

    __tablename__ = "semantic_fences"

    tenant: Mapped[str] = mapped_column(String(255), primary_key=True)
    fenced_at: Mapped[datetime] = mapped_column(UTCDateTime())


class PartitionSize(Base):
    """How many entries one partition holds, kept by triggers on ``semantic_entries``
    (migration 0015) in the transaction of every change, so a tenant's bounds are read
    from its partitions' rows instead of counted over its entries."""

    __tablename__ = "semantic_partition_sizes"

    tenant: Mapped[str] = mapped_column(String(255), primary_key=True)
    partition_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    entries: Mapped[int] = mapped_column(Integer)
