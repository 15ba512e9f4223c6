"""The gateway's tables: tenants, hashed API keys, versioned policies, server secrets,
and the operations tables: audit log, misfire samples, the verifier ranges they ruled
out, request stats, engine snapshots.

Declared on the gateway's own ``Base``; the one Alembic history in
``migrations/`` creates them (``0002_gateway_tenants``,
``0003_operations_tables``). Never ``create_all``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from semantic.models import NAMING_CONVENTION, UTCDateTime


class Base(DeclarativeBase):
    """Declarative base of the gateway's tables."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # a slug chosen by the admin
    name: Mapped[str] = mapped_column(String(255))
    disabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # Minted at creation and part of the prefix namespace, so a deleted tenant whose
    # id is created again starts with no KV (migration 0005). Always set by the app.
    namespace_id: Mapped[str | None] = mapped_column(String(32), nullable=True)


class ApiKey(Base):
    """A tenant's key, stored as SHA-256 of the key (keys are 256-bit random tokens)."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(255), default="")
    key_prefix: Mapped[str] = mapped_column(String(16))  # shown in listings, never the key
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class PolicyVersion(Base):
    """Every policy change is a new row; the highest version is in force."""

    __tablename__ = "policy_versions"
    __table_args__ = (UniqueConstraint("tenant_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    version: Mapped[int] = mapped_column(Integer)
    policy: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    created_by: Mapped[str] = mapped_column(String(255))


class RateLimitBucket(Base):
    """A tenant's rate-limit bucket shared by the gateway replicas on PostgreSQL
    (gateway/proxy/ratelimit_shared.py); times are the database server's epoch seconds."""

    __tablename__ = "rate_limit_buckets"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    allowed: Mapped[bool] = mapped_column(Boolean)


class ConcurrencyLease(Base):
    """A request in flight of a tenant with ``max_concurrent_requests``, shared by the
    gateway replicas on PostgreSQL (gateway/proxy/concurrency_stores.py); ``expires_at``
    is the database server's epoch seconds, renewed while the request runs."""

    __tablename__ = "concurrency_leases"

    slot_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    lease_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    expires_at: Mapped[float] = mapped_column(Float)


class ServerSecret(Base):
    """Secrets generated on first start and shared by every replica (e.g. the KV salt)."""

    __tablename__ = "server_secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class AuditEvent(Base):
    """Every admin action: who, when, what, on which tenant."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    actor: Mapped[str] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(64))
    tenant_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    target: Mapped[str | None] = mapped_column(String(255), nullable=True)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class MisfireSample(Base):
    """A sampled semantic hit waiting for (or carrying) a human label and a shadow verdict."""

    __tablename__ = "misfire_samples"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    request_id: Mapped[str] = mapped_column(String(64))
    entry_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    partition_key: Mapped[str] = mapped_column(String(64))
    question: Mapped[str] = mapped_column(Text)
    matched_question: Mapped[str] = mapped_column(Text)
    served_answer: Mapped[str] = mapped_column(Text)
    score: Mapped[float] = mapped_column(Float)
    threshold: Mapped[float] = mapped_column(Float)
    # the pair verifier's score of the served pair (None: sampled with the verifier off)
    verifier_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    # which score scale gave it (GatewayVerifier.scale_id_of; None before migration 0008)
    verifier_model: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # which embedder's scale ``score`` is on (None before migration 0010: unknown)
    embedder_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    entity_comparison: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # human review: label "correct" | "misfire", None while pending
    label: Mapped[str | None] = mapped_column(String(16), nullable=True, index=True)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    labeled_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    labeled_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # shadow verification: the model asked again in the background
    shadow_verdict: Mapped[str | None] = mapped_column(String(16), nullable=True)
    shadow_similarity: Mapped[float | None] = mapped_column(Float, nullable=True)
    shadow_answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    shadow_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class VerifierRuledOut(Base):
    """The verifier cut below which a tenant's labels ruled every range out, per target,
    score scale and evidence (gateway/calibration_ruled_out.py; migrations 0013 and
    0016). Kept so that labels arriving later below such a range (a review backlog)
    cannot re-serve it, across restarts and replicas; deleted with the tenant, and when
    a label changes."""

    __tablename__ = "verifier_ruled_out"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    target: Mapped[float] = mapped_column(Float, primary_key=True)
    # the score scales in force, sorted and joined by "," ("*": every scale)
    scales: Mapped[str] = mapped_column(String(255), primary_key=True)
    # what the floor rests on: its misfires' lowest similarity by the embedder in force,
    # "<similarity>@<embedder id>" ("*": holds everywhere; the floors kept before 0016)
    evidence: Mapped[str] = mapped_column(String(255), primary_key=True, server_default="*")
    band_cut: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class RequestStat(Base):
    """One served request, for reports (hit rates over time, TTFT with cache on vs off)."""

    __tablename__ = "request_stats"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    tenant_id: Mapped[str] = mapped_column(String(64), index=True)
    cache: Mapped[str] = mapped_column(String(16))  # semantic-hit | prefix-hit | miss | bypass
    semantic: Mapped[str] = mapped_column(String(200))  # x-cachegate-semantic
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    # which embedder's scale ``score`` is on (None: no lookup ran, or before migration 0011)
    embedder_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cached_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    ttft_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    latency_ms: Mapped[float] = mapped_column(Float)
    stream: Mapped[bool] = mapped_column(Boolean, default=False)


class EngineSnapshot(Base):
    """The prefix cache's memory and eviction counters over time (leaks show as a rising floor)."""

    __tablename__ = "engine_snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    blocks_total: Mapped[int] = mapped_column(Integer)
    blocks_used: Mapped[int] = mapped_column(Integer)
    blocks_cached: Mapped[int] = mapped_column(Integer)
    bytes_per_block: Mapped[int] = mapped_column(Integer)
    evictions: Mapped[int] = mapped_column(Integer)
    query_blocks: Mapped[int] = mapped_column(Integer)
    hit_blocks: Mapped[int] = mapped_column(Integer)
    # the process that wrote it (host:pid): replicas' counters are separate series
    # (migration 0014; None before it)
    replica: Mapped[str | None] = mapped_column(String(64), nullable=True)
