"""Tenant policies through the admin API: read, history, replace (PUT), change (PATCH).

Every write is a new ``policy_versions`` row (version = previous + 1, with who and
when) and a ``policy.set`` audit event listing the changed fields, in one
transaction, with a ``tenant`` change-log row; then the authentication cache of
this replica is dropped, so the policy applies to the tenant's next request
(other replicas: when their replica-sync feed replays the row,
:mod:`gateway.sync.feed`). Two admins writing at once: the loser of the unique
(tenant, version) race retries, and gets a 409 only after three tries.

Read-modify-write without lost updates: ``GET`` answers the version as an ``ETag``
(``"3"``); a ``PUT`` or ``PATCH`` sent with ``If-Match: "3"`` is written only if 3 is
still the latest version, and is a 412 otherwise (RFC 9110 13.1.1; ``*`` matches any).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from sqlalchemy import exc as sa_exc
from sqlalchemy import select

from gateway.admin import audit
from gateway.admin.schemas import PolicyOut, validation_message
from gateway.admin.service import (
    ConflictError,
    PreconditionFailedError,
    policy_row,
    require_row,
)
from gateway.errors import BadRequestError
from gateway.models import PolicyVersion
from gateway.policy import TenantPolicy
from gateway.sync.log import log_tenant_change
from gateway.tenants import TenantStore, latest_policy

_WRITE_ATTEMPTS = 3


def _policy_out(tenant_id: str, row: PolicyVersion | None) -> PolicyOut:
    if row is None:
        return PolicyOut(
            tenant_id=tenant_id, version=0, policy=TenantPolicy(), created_at=None, created_by=None
        )
    return PolicyOut(
        tenant_id=tenant_id,
        version=row.version,
        policy=TenantPolicy.from_stored(row.policy),
        created_at=row.created_at,
        created_by=row.created_by,
    )


def policy_etag(version: int) -> str:
    return f'"{version}"'


def matches(if_match: str | None, version: int) -> bool:
    """Whether the ``If-Match`` header (absent: no condition) names ``version``; a weak
    tag never matches (RFC 9110 uses strong comparison for If-Match)."""
    if if_match is None:
        return True
    tags = [tag.strip() for tag in if_match.split(",")]
    return "*" in tags or policy_etag(version) in tags


def check_if_match(if_match: str | None) -> None:
    """A 400 for an ``If-Match`` that holds no entity tag, or only weak ones: ``If-Match:
    14`` (unquoted) was a 412 "the policy changed", which it had not (session 45's
    review)."""
    if if_match is None:
        return
    tags = [tag.strip() for tag in if_match.split(",")]
    if any(not _ETAG.fullmatch(tag) for tag in tags):
        raise BadRequestError(
            'If-Match must hold quoted entity tags, such as "3" (the policy\'s ETag)',
            param="If-Match",
            code="invalid_if_match",
        )
    if all(tag.startswith("W/") for tag in tags):  # RFC 9110: a 412, said as it is
        raise PreconditionFailedError(
            'a weak entity tag (W/"…") never matches If-Match: send the ETag as read ("3")',
            code="policy_version_mismatch",
        )


_ETAG = re.compile(r'\*|(?:W/)?"[\x21\x23-\x7e]*"')


def policy_diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[Any]]:
    """``{field: [old, new]}`` for every field that changed."""
    return {k: [old.get(k), v] for k, v in new.items() if old.get(k) != v}


class PolicyAdmin:
    def __init__(self, store: TenantStore) -> None:
        self.store = store
        self.sessions = store.sessions

    def policy(self, tenant_id: str) -> PolicyOut:
        with self.sessions() as s:
            require_row(s, tenant_id)
            return _policy_out(tenant_id, latest_policy(s, tenant_id))

    def history(self, tenant_id: str, limit: int) -> list[PolicyOut]:
        with self.sessions() as s:
            require_row(s, tenant_id)
            rows = s.scalars(
                select(PolicyVersion)
                .where(PolicyVersion.tenant_id == tenant_id)
                .order_by(PolicyVersion.version.desc())
                .limit(limit)
            )
            return [_policy_out(tenant_id, row) for row in rows]

    def set_policy(
        self, actor: str, tenant_id: str, policy: TenantPolicy, if_match: str | None = None
    ) -> PolicyOut:
        return self._write_policy(
            actor, tenant_id, lambda _current: policy, if_match, replaces=True
        )

    def patch_policy(
        self, actor: str, tenant_id: str, changes: dict[str, Any], if_match: str | None = None
    ) -> PolicyOut:
        """The current policy with ``changes`` applied, validated as a whole."""

        def merged(current: dict[str, Any]) -> TenantPolicy:
            try:
                return TenantPolicy.model_validate(current | changes)
            except ValidationError as exc:
                message, param = validation_message(exc.errors(include_url=False))
                raise BadRequestError(f"invalid policy: {message}", param=param) from None

        return self._write_policy(actor, tenant_id, merged, if_match)

    def _write_policy(
        self,
        actor: str,
        tenant_id: str,
        build: Callable[[dict[str, Any]], TenantPolicy],
        if_match: str | None,
        replaces: bool = False,
    ) -> PolicyOut:
        check_if_match(if_match)
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                with self.sessions.begin() as s:
                    require_row(s, tenant_id, lock=True)
                    latest = latest_policy(s, tenant_id)
                    # Under the tenant row's lock: no version can land between this
                    # check and the write.
                    if not matches(if_match, latest.version if latest else 0):
                        raise PreconditionFailedError(
                            "the policy changed since the version in If-Match; "
                            "read it again and retry",
                            code="policy_version_mismatch",
                        )
                    current = (
                        TenantPolicy()
                        if latest is None
                        else TenantPolicy.from_stored(latest.policy)
                    )
                    if current.is_read_degraded and not replaces:
                        raise BadRequestError(
                            "the stored policy has fields this build cannot read; "
                            "PUT a whole policy to replace it",
                            code="policy_unreadable",
                        )
                    old = current.model_dump(mode="json")
                    policy: TenantPolicy = build(old)
                    row = policy_row(
                        tenant_id, (latest.version if latest else 0) + 1, policy, actor
                    )
                    s.add(row)
                    details = {
                        "version": row.version,
                        "changes": policy_diff(old, policy.model_dump(mode="json")),
                    }
                    audit.add_event(
                        s, actor, audit.POLICY_SET, tenant_id, f"v{row.version}", details
                    )
                    s.flush()
                    log_tenant_change(s, tenant_id)
                    out = _policy_out(tenant_id, row)
                break
            except sa_exc.IntegrityError:  # another admin wrote the same version first
                if attempt == _WRITE_ATTEMPTS - 1:
                    raise ConflictError("the policy changed concurrently; retry") from None
        self.store.invalidate_cache([tenant_id])  # effective on the next request
        return out
