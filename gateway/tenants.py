"""Tenants, their API keys and policies, read through a short-lived in-memory cache.

This is the read side only: every write (tenants, keys, policies, the
development tenant at start-up) goes through the admin service
(:mod:`gateway.admin.service`, :mod:`gateway.admin.policies`), so audit events,
change-log rows and cache invalidation are written in one place.

Keys are 256-bit random tokens (``cg-…``), so a plain SHA-256 is a sound
at-rest hash: there is nothing to brute-force. Authentication results and
policies are cached for ``cache_seconds`` in a bounded cache that holds only
valid keys (:mod:`gateway.auth_cache`). Every write that can change an
authentication result or a policy logs a ``tenant`` change in its own
transaction (:func:`gateway.sync.log.log_tenant_change`); the replica-sync feed
(:mod:`gateway.sync.feed`) replays it on every replica by calling
:meth:`TenantStore.invalidate_cache`, so other replicas see the change as soon
as the feed wakes (``cache_seconds`` bounds it if the feed is down). When the
database is down, the last known answer for a key keeps serving, so the
gateway fails open to the upstream instead of locking every tenant out, for at
most ``MAX_STALE_SECONDS`` after the database last confirmed it. "Down" includes a
pool with no free connection in time (``sqlalchemy.exc.TimeoutError``) and, on
PostgreSQL, a lookup held past the engine's ``lock_timeout`` (a table lock taken
elsewhere, say another replica's migration) or past ``AUTH_STATEMENT_TIMEOUT_MS``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, event, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session, sessionmaker

from gateway.auth_cache import AuthCache
from gateway.db_rest import DbRest
from gateway.errors import AuthenticationError, PermissionDeniedError, ServiceUnavailableError
from gateway.models import ApiKey, PolicyVersion, ServerSecret, Tenant
from gateway.policy import TenantPolicy
from semantic.store_db import OUTAGE_ERRORS


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


def utc_now() -> datetime:
    return datetime.now(UTC)


def latest_policy(s: Session, tenant_id: str) -> PolicyVersion | None:
    """The tenant's newest policy version (None: it has none, the defaults apply):
    what authentication serves and what an admin write builds on."""
    return s.scalars(
        select(PolicyVersion)
        .where(PolicyVersion.tenant_id == tenant_id)
        .order_by(PolicyVersion.version.desc())
        .limit(1)
    ).first()


ANONYMOUS = "anonymous:"  # the prefix_user of a request without an end-user identity


@dataclass(frozen=True)
class TenantContext:
    """What a request knows about its caller."""

    tenant_id: str
    name: str
    policy: TenantPolicy
    policy_version: int
    namespace_id: str = ""  # minted at creation (gateway/models.py Tenant.namespace_id)
    # Set per request (for_user) when the policy's prefix_scope is "user".
    prefix_user: str = ""

    @property
    def prefix_namespace(self) -> str:
        # A sharing group is an admin decision (seed 000: a public document for an
        # authorized group); by default every tenant has its own namespace, which
        # includes the id minted at creation: a deleted and re-created tenant id
        # must not inherit the old tenant's KV blocks.
        group = self.policy.prefix_namespace
        if group:
            base = f"group:{group}"
        else:
            own = f"tenant:{self.tenant_id}"
            base = f"{own}:{self.namespace_id}" if self.namespace_id else own
        # With a user, a JSON list: "group:G" + ":user:<digest>" was the namespace of a
        # group named "G:user:<digest>" too (an admin could name one into a user's KV;
        # session 45's review). A list starts with "[", which no base does.
        if self.prefix_user:
            return json.dumps([base, self.prefix_user], separators=(",", ":"))
        return base

    def for_user(self, user: str | None) -> TenantContext:
        """This context for one request of ``user``: under ``prefix_scope: "user"`` its
        prefix KV is the user's own, so ``cached_tokens`` (and time to first token)
        cannot tell one end user what another sent. A digest, not the id: the namespace
        travels in a header to HTTP engines. A request without a user gets a namespace
        of its own (shares no KV), as a user-scoped semantic cache skips it."""
        if self.policy.prefix_scope != "user":
            return self
        if user:
            # A user id means something inside its tenant only: with the tenant in the
            # digest, "alice" of two tenants of one sharing group (whose namespace has no
            # tenant in it) share no KV (a review: tenant B's alice reused A's alice's).
            named = json.dumps([self.tenant_id, self.namespace_id, user])  # \u escapes
            digest = hashlib.sha256(named.encode()).hexdigest()[:32]
            return replace(self, prefix_user=f"user:{digest}")
        return replace(self, prefix_user=f"{ANONYMOUS}{secrets.token_hex(16)}")

    @property
    def is_prefix_private(self) -> bool:
        """Whether the prefix namespace is this request's alone (an end user without an
        identity under ``prefix_scope: "user"``): no later request can reuse its KV, so
        engines keep none of it rather than push out blocks that are reused."""
        return self.prefix_user.startswith(ANONYMOUS)

    @property
    def semantic_namespace(self) -> str:
        # The minted id here too: a request authenticated before its tenant was deleted
        # can still backfill after the delete dropped the tenant's entries, and a
        # tenant re-created under that id must never be served such an answer.
        own = f"tenant:{self.tenant_id}"
        return f"{own}:{self.namespace_id}" if self.namespace_id else own


#: The authentication lookup's ``statement_timeout`` on PostgreSQL (milliseconds): a few
#: primary-key reads, so anything longer is a database in trouble, answered as one that
#: is down. Set per transaction (``SET LOCAL``): the engine is shared with reports,
#: whose aggregations may rightly take longer.
AUTH_STATEMENT_TIMEOUT_MS = 3_000

#: What the key lookup (and every admin route) raises when the database cannot answer
#: (semantic/store_db.py: down, refusing, timing out, read-only after a failover).
DB_UNAVAILABLE: tuple[type[Exception], ...] = OUTAGE_ERRORS

#: A bearer token longer than this is refused without a database query (our keys are
#: 46 characters; a fixed development key is whatever the operator chose, within reason).
MAX_KEY_CHARS = 256


def enforce_foreign_keys(engine: Engine) -> None:
    """Turn SQLite's foreign keys on for every connection of ``engine`` (a no-op on
    other databases, which always enforce them).

    SQLite leaves them off per connection unless asked, which made the tenant tables'
    ``ON DELETE CASCADE`` inert: a key or policy version written for a tenant being
    deleted outlived it, and a tenant re-created under the id inherited it. The admin
    writers lock the tenant row against that (:func:`gateway.admin.service.require_row`);
    this makes any other path an error instead of an orphan. Only the gateway's own
    tables have foreign keys (the semantic store's have none)."""
    if engine.dialect.name != "sqlite":
        return

    @event.listens_for(engine, "connect")
    def _foreign_keys(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()


def _invalid() -> AuthenticationError:
    return AuthenticationError("invalid API key", code="invalid_api_key")


def _digest(raw_key: str | None) -> str:
    if not raw_key:
        raise AuthenticationError(
            "missing API key: send 'Authorization: Bearer <key>'", code="invalid_api_key"
        )
    if len(raw_key) > MAX_KEY_CHARS:
        raise _invalid()
    return hash_key(raw_key)


class TenantStore:
    def __init__(self, engine: Engine, cache_seconds: float = 2.0) -> None:
        self.engine = engine
        self.sessions = sessionmaker(engine, expire_on_commit=False)
        self.auth_cache: AuthCache[TenantContext] = AuthCache(cache_seconds)
        # After the key store failed or hung, requests rest from it (gateway/db_rest.py).
        self.rest = DbRest()

    @property
    def cache_seconds(self) -> float:
        return self.auth_cache.fresh_seconds

    @cache_seconds.setter
    def cache_seconds(self, value: float) -> None:
        self.auth_cache.fresh_seconds = value

    # ---- authentication -------------------------------------------------------------
    def authenticate(self, raw_key: str | None) -> TenantContext:
        digest = _digest(raw_key)
        cache = self.auth_cache
        ctx = cache.fresh(digest)
        if ctx is not None:
            return ctx
        if cache.known_invalid(digest):
            raise _invalid()
        if not self.rest.take_turn():  # failed moments ago: not asked again yet
            return self.from_memory(raw_key)
        seen = cache.generation  # a change committed during the read is not undone
        try:
            loaded = self._load(digest)
        except DB_UNAVAILABLE:
            # Refused: it failed fast, so it is asked again at once (an unknown key is a
            # 401 as soon as it is back); only a hang rests it (gateway/proxy/access.py).
            return self.from_memory(raw_key)
        except Exception:  # it answered (a disabled tenant, a bad row): not an outage
            self.rest.succeeded()
            raise
        self.rest.succeeded()
        if loaded is None:
            cache.put_invalid(digest, seen)
            raise _invalid()
        cache.put_valid(digest, loaded, seen)
        return loaded

    def from_memory(self, raw_key: str | None) -> TenantContext:
        """While the database is away (refusing, hanging, resting after either): the
        key's last confirmed context if recent enough (fail open), a 401 for a key it
        said lately does not exist, else a 503. Never asks the database, so the event
        loop may call it."""
        digest = _digest(raw_key)
        cache = self.auth_cache
        ctx = cache.fresh(digest) or cache.stale(digest)
        if ctx is not None:
            return ctx
        if cache.known_invalid(digest):
            raise _invalid()
        raise ServiceUnavailableError("the key store is unavailable; try again shortly")

    def cached(self, raw_key: str | None) -> TenantContext | None:
        """A still-fresh authenticated context, without touching the database.

        Lets the request path answer most requests on the event loop instead of
        queueing behind CPU-bound work in the thread pool.
        """
        if not raw_key or len(raw_key) > MAX_KEY_CHARS:
            return None
        return self.auth_cache.fresh(hash_key(raw_key))

    def _load(self, digest: str) -> TenantContext | None:
        with self.sessions() as s:
            if self.engine.dialect.name == "postgresql":  # ends with the transaction
                s.execute(text(f"SET LOCAL statement_timeout = {AUTH_STATEMENT_TIMEOUT_MS}"))
            row = s.execute(
                select(Tenant, ApiKey)
                .join(ApiKey, ApiKey.tenant_id == Tenant.id)
                .where(ApiKey.key_hash == digest, ApiKey.revoked_at.is_(None))
            ).first()
            if row is None:
                return None
            tenant = row[0]
            if tenant.disabled:
                raise PermissionDeniedError(f"tenant {tenant.id!r} is disabled")
            policy, version = self._policy(s, tenant.id)
            return TenantContext(tenant.id, tenant.name, policy, version, tenant.namespace_id or "")

    def invalidate_cache(self, tenants: Iterable[str] | None = None) -> None:
        """Forget what authentication remembered of ``tenants`` (None: of everyone): an
        admin write drops only its own tenant's keys, so the other tenants' keys keep
        working from memory through a database outage right after it."""
        if tenants is None:
            self.auth_cache.clear()
        else:
            self.auth_cache.invalidate(tenants)

    # ---- reads -----------------------------------------------------------------------
    def get_tenant(self, tenant_id: str) -> Tenant | None:
        with self.sessions() as s:
            return s.get(Tenant, tenant_id)

    def namespace_id(self, tenant_id: str) -> str:
        """The tenant's minted namespace id ("" for no such tenant)."""
        with self.sessions() as s:
            tenant = s.get(Tenant, tenant_id)
            return (tenant.namespace_id or "") if tenant is not None else ""

    def has_key(self, raw_key: str) -> bool:
        with self.sessions() as s:
            return (
                s.scalar(select(ApiKey.id).where(ApiKey.key_hash == hash_key(raw_key))) is not None
            )

    def policy(self, tenant_id: str) -> tuple[TenantPolicy, int]:
        with self.sessions() as s:
            return self._policy(s, tenant_id)

    def target_of(self, tenant_id: str) -> float | None:
        """The tenant's ``target_misfire_rate``; None when it no longer exists."""
        with self.sessions() as s:
            if s.get(Tenant, tenant_id) is None:
                return None
            return self._policy(s, tenant_id)[0].target_misfire_rate

    @staticmethod
    def _policy(s: Session, tenant_id: str) -> tuple[TenantPolicy, int]:
        row = latest_policy(s, tenant_id)
        if row is None:
            return TenantPolicy(), 0
        return TenantPolicy.from_stored(row.policy), row.version

    # ---- server secrets ---------------------------------------------------------------
    def server_secret(self, name: str) -> str:
        """The named secret, generated and stored on first use (shared by all replicas)."""
        with self.sessions() as s:
            row = s.get(ServerSecret, name)
            if row is not None:
                return row.value
        try:
            with self.sessions.begin() as s:
                s.add(ServerSecret(name=name, value=secrets.token_hex(32), created_at=utc_now()))
        except sa_exc.IntegrityError:
            pass  # another replica stored it first; its value is the truth
        with self.sessions() as s:
            stored = s.get(ServerSecret, name)
            assert stored is not None
            return stored.value
