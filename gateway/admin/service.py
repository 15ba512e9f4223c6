"""What the admin API does to tenants and their API keys (policies:
:mod:`gateway.admin.policies`): the one place they are written, the development
tenant made at start-up included (:meth:`TenantAdmin.ensure_dev_tenant`);
:class:`~gateway.tenants.TenantStore` only reads them.

Every change writes its audit event and a ``tenant`` change-log row
(:func:`gateway.sync.log.log_tenant_change`) in the same transaction, then drops
the authentication cache of this replica (``TenantStore.invalidate_cache``), so
it applies to the next request here; other replicas drop theirs when their
replica-sync feed replays the row (:mod:`gateway.sync.feed`). Methods are
synchronous (the routes run them in a thread).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from gateway.admin import audit
from gateway.admin.schemas import KeyIssued, KeyOut, TenantCreate, TenantOut, named
from gateway.calibration_ruled_out import forget_ruled_out
from gateway.errors import GatewayError, NotFoundError, ServiceUnavailableError
from gateway.models import ApiKey, MisfireSample, PolicyVersion, RequestStat, Tenant
from gateway.policy import TenantPolicy
from gateway.proxy.ratelimit import RateLimiter
from gateway.sync.log import log_tenant_change
from gateway.tenants import TenantStore, hash_key, utc_now
from semantic import SemanticCache
from semantic.errors import StoreUnavailableError
from semantic.store_rows import SemanticRows

KEY_PREFIX = "cg-"
#: Who the audit log names for the development tenant and key made at start-up.
DEV_ACTOR = "system:dev-tenant"


def new_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_prefix(raw: str) -> str:
    """What listings and the audit log show of a key: its first 10 characters, and of a
    short key (a fixed development key, say ``sk-local``) at most a quarter of it, so
    that what is shown never is, or nearly is, the key itself."""
    return raw[: min(10, len(raw) // 4)]


class ConflictError(GatewayError):
    status = 409
    type = "invalid_request_error"


class PreconditionFailedError(GatewayError):
    """An ``If-Match`` that no longer names the current version."""

    status = 412
    type = "invalid_request_error"


def _tenant_outs(s: Session, tenants: Sequence[Tenant]) -> list[TenantOut]:
    """The tenants with their policy version and active key count (two grouped queries)."""
    ids = [t.id for t in tenants]
    if not ids:
        return []
    versions: dict[str, int] = {
        tenant_id: version
        for tenant_id, version in s.execute(
            select(PolicyVersion.tenant_id, func.max(PolicyVersion.version))
            .where(PolicyVersion.tenant_id.in_(ids))
            .group_by(PolicyVersion.tenant_id)
        )
    }
    keys: dict[str, int] = {
        tenant_id: count
        for tenant_id, count in s.execute(
            select(ApiKey.tenant_id, func.count())
            .where(ApiKey.tenant_id.in_(ids), ApiKey.revoked_at.is_(None))
            .group_by(ApiKey.tenant_id)
        )
    }
    return [
        TenantOut(
            id=t.id,
            name=t.name,
            disabled=t.disabled,
            created_at=t.created_at,
            updated_at=t.updated_at,
            policy_version=versions.get(t.id) or 0,
            active_keys=keys.get(t.id) or 0,
        )
        for t in tenants
    ]


def _tenant_out(s: Session, tenant: Tenant) -> TenantOut:
    return _tenant_outs(s, [tenant])[0]


def _key_out(key: ApiKey) -> KeyOut:
    return KeyOut(
        id=key.id,
        tenant_id=key.tenant_id,
        name=key.name,
        prefix=key.key_prefix,
        created_at=key.created_at,
        revoked_at=key.revoked_at,
    )


def require_row(s: Session, tenant_id: str, *, lock: bool = False) -> Tenant:
    """The tenant, or :class:`NotFoundError`.

    ``lock`` (every write that names the tenant, and its delete): the row stays the
    tenant's until the transaction ends. A write racing a delete otherwise read the row,
    lost it to the delete, and then wrote a key or policy version for no tenant (an
    orphan a tenant later re-created under the id inherited, or a foreign-key 500) or
    updated nothing (a stale-data 500). Locked, the delete waits for the write (and
    removes what it wrote), or the write waits for the delete and finds no row: a 404.
    Must come first in the transaction (SQLite's BEGIN cannot follow a write)."""
    if lock and s.get_bind().dialect.name == "sqlite":
        # No row locks on SQLite: take its one write lock now, not at the first write
        # (pysqlite begins lazily), so the read below is still true when we write.
        s.execute(text("BEGIN IMMEDIATE"))
    tenant = s.get(Tenant, tenant_id, with_for_update=lock)  # PostgreSQL: FOR UPDATE
    if tenant is None:
        raise NotFoundError(
            f"no such tenant: {named(tenant_id)}", param="tenant_id", code="tenant_not_found"
        )
    return tenant


def policy_row(tenant_id: str, version: int, policy: TenantPolicy, actor: str) -> PolicyVersion:
    return PolicyVersion(
        tenant_id=tenant_id,
        version=version,
        policy=policy.model_dump(mode="json"),
        created_at=utc_now(),
        created_by=actor,
    )


class TenantAdmin:
    def __init__(
        self,
        store: TenantStore,
        cache: SemanticCache | None,
        limiter: RateLimiter | None,
        *,
        rows: SemanticRows | None = None,
    ) -> None:
        """``rows``: where the semantic layer is off on this replica, its rows all the
        same (semantic/store_rows.py): a tenant delete deletes them."""
        self.store = store
        self.sessions = store.sessions
        self.cache = cache
        self.rows: SemanticRows | None = cache if cache is not None else rows
        self.limiter = limiter

    # ---- tenants -----------------------------------------------------------------------
    def create(self, actor: str, body: TenantCreate) -> TenantOut:
        return self.add_tenant(actor, body.id, body.name, body.policy)

    def add_tenant(
        self, actor: str, tenant_id: str, name: str | None, policy: TenantPolicy | None = None
    ) -> TenantOut:
        """A new tenant (and its first policy); :class:`ConflictError` if it exists.

        Entries left under the id by an earlier tenant of it are deleted first: a
        backfill that committed after that tenant's delete, and could not re-check it
        then (the database away, its replica gone before the database came back), would
        be listed and counted as the new tenant's. Never served: the new tenant's
        partitions are under its own minted id."""
        now = utc_now()
        swept = self._drop_leftovers(tenant_id)
        try:
            with self.sessions.begin() as s:
                if s.get(Tenant, tenant_id) is not None:
                    raise ConflictError(f"tenant {tenant_id!r} already exists", param="id")
                tenant = Tenant(
                    id=tenant_id,
                    name=name or tenant_id,
                    disabled=False,
                    created_at=now,
                    updated_at=now,
                    namespace_id=secrets.token_hex(16),  # a re-created id gets a new one
                )
                s.add(tenant)
                s.flush()
                details: dict[str, Any] = {"name": tenant.name}
                if swept:
                    details["leftover_entries_deleted"] = swept
                if policy is not None:
                    s.add(policy_row(tenant_id, 1, policy, actor))
                    details["policy_version"] = 1
                audit.add_event(s, actor, audit.TENANT_CREATE, tenant_id, tenant_id, details)
                s.flush()
                log_tenant_change(s, tenant_id)
                out = _tenant_out(s, tenant)
        except sa_exc.IntegrityError:  # created concurrently
            raise ConflictError(f"tenant {tenant_id!r} already exists", param="id") from None
        self.store.invalidate_cache([tenant_id])
        return out

    def list_tenants(self, limit: int, offset: int) -> list[TenantOut]:
        with self.sessions() as s:
            rows = s.scalars(select(Tenant).order_by(Tenant.id).limit(limit).offset(offset))
            return _tenant_outs(s, list(rows))

    def get(self, tenant_id: str) -> TenantOut:
        with self.sessions() as s:
            return _tenant_out(s, require_row(s, tenant_id))

    def rename(self, actor: str, tenant_id: str, name: str) -> TenantOut:
        with self.sessions.begin() as s:
            tenant = require_row(s, tenant_id, lock=True)
            old, tenant.name, tenant.updated_at = tenant.name, name, utc_now()
            audit.add_event(
                s, actor, audit.TENANT_UPDATE, tenant_id, tenant_id, {"name": [old, name]}
            )
            s.flush()
            log_tenant_change(s, tenant_id)
            out = _tenant_out(s, tenant)
        self.store.invalidate_cache([tenant_id])
        return out

    def set_disabled(self, actor: str, tenant_id: str, disabled: bool) -> TenantOut:
        with self.sessions.begin() as s:
            tenant = require_row(s, tenant_id, lock=True)
            changed = tenant.disabled != disabled
            tenant.disabled, tenant.updated_at = disabled, utc_now()
            action = audit.TENANT_DISABLE if disabled else audit.TENANT_ENABLE
            audit.add_event(s, actor, action, tenant_id, tenant_id, {"changed": changed})
            s.flush()
            log_tenant_change(s, tenant_id)
            out = _tenant_out(s, tenant)
        self.store.invalidate_cache([tenant_id])  # a disabled tenant is refused on its next request
        return out

    def delete(self, actor: str, tenant_id: str) -> tuple[int, int, int]:
        """Delete the tenant, its keys, policies, samples, stats and semantic entries.
        Returns (semantic entries, keys, policy versions) removed."""
        with self.sessions() as s:
            minted = require_row(s, tenant_id).namespace_id or ""  # its rate-limit bucket
        entries = self._drop_entries(tenant_id)
        with self.sessions.begin() as s:
            require_row(s, tenant_id, lock=True)  # a write in flight finishes first
            keys = len(
                s.execute(
                    delete(ApiKey).where(ApiKey.tenant_id == tenant_id).returning(ApiKey.id)
                ).all()
            )
            versions = len(
                s.execute(
                    delete(PolicyVersion)
                    .where(PolicyVersion.tenant_id == tenant_id)
                    .returning(PolicyVersion.id)
                ).all()
            )
            s.execute(delete(MisfireSample).where(MisfireSample.tenant_id == tenant_id))
            forget_ruled_out(s, tenant_id)
            s.execute(delete(RequestStat).where(RequestStat.tenant_id == tenant_id))
            s.execute(delete(Tenant).where(Tenant.id == tenant_id))
            details = {"semantic_entries": entries, "keys": keys, "policy_versions": versions}
            audit.add_event(s, actor, audit.TENANT_DELETE, tenant_id, tenant_id, details)
            log_tenant_change(s, tenant_id)
        self.store.invalidate_cache([tenant_id])
        # A request that was already past authentication may have backfilled meanwhile
        # (one on another replica re-checks the tenant once its entry is committed, so
        # between that check and this sweep no entry is left: gateway/proxy/pipeline.py).
        # Not once the id is taken again: the sweep works by id, and took the new
        # tenant's entries and counts (an admin review; its own requests re-check their
        # minted id, so the old tenant's late backfills are gone all the same).
        if self.is_absent(tenant_id):
            entries += self._drop_entries(tenant_id)
        if self.limiter is not None:  # its incarnation's bucket and counts only
            self.limiter.forget(tenant_id, minted)
        return entries, keys, versions

    def _drop_leftovers(self, tenant_id: str) -> int:
        """Delete the entries of an id no tenant holds (0 where one does: its own).
        A tenant created under the id between the check and the sweep loses what it
        stored in those milliseconds: cache entries, never a wrong owner."""
        if self.rows is None or not self.is_absent(tenant_id):
            return 0
        return self._drop_entries(tenant_id)

    def is_absent(self, tenant_id: str) -> bool:
        """No tenant holds the id now (none created again since a delete)."""
        return not self.store.namespace_id(tenant_id)

    def _drop_entries(self, tenant_id: str) -> int:
        if self.rows is None:
            return 0
        try:
            return self.rows.invalidate(tenant=tenant_id)
        except StoreUnavailableError as exc:
            # The cause names the database URL: logs only, never the error body.
            raise ServiceUnavailableError("the semantic store is unavailable") from exc

    # ---- API keys ----------------------------------------------------------------------
    def issue_key(
        self, actor: str, tenant_id: str, name: str, raw_key: str | None = None
    ) -> KeyIssued:
        """A new key, returned once (only its hash is stored); ``raw_key`` fixes it
        (the development key); a key stored already raises ``IntegrityError``."""
        raw = raw_key or new_api_key()
        with self.sessions.begin() as s:
            require_row(s, tenant_id, lock=True)
            key = ApiKey(
                tenant_id=tenant_id,
                name=name,
                key_prefix=key_prefix(raw),
                key_hash=hash_key(raw),
                created_at=utc_now(),
            )
            s.add(key)
            s.flush()
            audit.add_event(
                s,
                actor,
                audit.KEY_ISSUE,
                tenant_id,
                str(key.id),
                {"key_id": key.id, "prefix": key.key_prefix, "name": name},
            )
            log_tenant_change(s, tenant_id)  # a replica may have cached this key as unknown
            out = KeyIssued(**_key_out(key).model_dump(), key=raw)
        return out

    def list_keys(self, tenant_id: str) -> list[KeyOut]:
        with self.sessions() as s:
            require_row(s, tenant_id)
            rows = s.scalars(
                select(ApiKey).where(ApiKey.tenant_id == tenant_id).order_by(ApiKey.id)
            )
            return [_key_out(k) for k in rows]

    def revoke_key(self, actor: str, tenant_id: str, key_id: int) -> KeyOut:
        with self.sessions.begin() as s:
            require_row(s, tenant_id, lock=True)
            key = s.get(ApiKey, key_id)
            if key is None or key.tenant_id != tenant_id:
                raise NotFoundError(
                    f"{named(tenant_id)} has no API key {key_id}",
                    param="key_id",
                    code="key_not_found",
                )
            already = key.revoked_at is not None
            if not already:
                key.revoked_at = utc_now()
            audit.add_event(
                s,
                actor,
                audit.KEY_REVOKE,
                tenant_id,
                str(key_id),
                {"key_id": key_id, "prefix": key.key_prefix, "already_revoked": already},
            )
            log_tenant_change(s, tenant_id)
            out = _key_out(key)
        self.store.invalidate_cache([tenant_id])  # the key is refused on its next request
        return out

    # ---- start-up ----------------------------------------------------------------------
    def ensure_dev_tenant(self, tenant_id: str, raw_key: str | None) -> str | None:
        """Create the development tenant and key on first start; returns a new key or None.

        Replicas starting together race here: a unique-constraint loss means another
        replica created the same tenant or key first, which is what was wanted.
        """
        if self.store.get_tenant(tenant_id) is None:
            with contextlib.suppress(ConflictError):  # another replica made it
                self.add_tenant(DEV_ACTOR, tenant_id, "development tenant")
        if raw_key is not None:
            if self.store.has_key(raw_key):
                return None
            try:
                self.issue_key(DEV_ACTOR, tenant_id, "dev", raw_key)
            except sa_exc.IntegrityError:
                return None  # another replica stored the same key
            return raw_key
        with self.sessions() as s:
            has_any = s.scalar(select(ApiKey.id).where(ApiKey.tenant_id == tenant_id).limit(1))
        return None if has_any else self.issue_key(DEV_ACTOR, tenant_id, "dev").key
