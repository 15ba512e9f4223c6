"""The audit log of admin actions (table ``audit_events``).

Every change made through the admin API is recorded with who (the admin
actor), what (``action``), on which tenant, the target (a key id, an entry id,
a partition) and details. Changes to tenants, keys and policies write their
event in the same transaction as the change, so one never exists without the
other. Details never carry a raw API key or its hash: a key is named by its id
and its displayed prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from gateway.models import AuditEvent
from gateway.tenants import utc_now

# Actions written by the admin API (the review/report API may add its own).
TENANT_CREATE = "tenant.create"
TENANT_UPDATE = "tenant.update"
TENANT_DISABLE = "tenant.disable"
TENANT_ENABLE = "tenant.enable"
TENANT_DELETE = "tenant.delete"
KEY_ISSUE = "key.issue"
KEY_REVOKE = "key.revoke"
POLICY_SET = "policy.set"
CACHE_INVALIDATE = "cache.invalidate"


@dataclass(frozen=True)
class AuditRecord:
    id: int
    at: datetime
    actor: str
    action: str
    tenant_id: str | None
    target: str | None
    details: dict[str, Any] | None


def add_event(
    session: Session,
    actor: str,
    action: str,
    tenant_id: str | None,
    target: str | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    """Add an event to ``session``'s transaction (committed with the change it records)."""
    session.add(
        AuditEvent(
            at=utc_now(),
            actor=actor[:255],
            action=action[:64],
            tenant_id=tenant_id,
            target=None if target is None else target[:255],
            details=details,
        )
    )


class AuditLog:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    def record(
        self,
        actor: str,
        action: str,
        tenant_id: str | None,
        target: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Write one event in its own transaction."""
        with self.sessions.begin() as s:
            add_event(s, actor, action, tenant_id, target, details)

    def list(
        self,
        *,
        tenant_id: str | None = None,
        action: str | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[AuditRecord]:
        """Newest first; ``before_id`` pages backwards."""
        statement = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit)
        if tenant_id is not None:
            statement = statement.where(AuditEvent.tenant_id == tenant_id)
        if action is not None:
            statement = statement.where(AuditEvent.action == action)
        if before_id is not None:
            statement = statement.where(AuditEvent.id < before_id)
        with self.sessions() as s:
            return [
                AuditRecord(e.id, e.at, e.actor, e.action, e.tenant_id, e.target, e.details)
                for e in s.scalars(statement)
            ]
