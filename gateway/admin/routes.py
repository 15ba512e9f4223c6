"""The admin API under ``/admin`` (issue 6): tenants, API keys, versioned policies,
cache operations and the audit log. Every route needs the admin token
(:mod:`gateway.admin.auth`); every change is audited (:mod:`gateway.admin.audit`) and
applies to the tenant's next request. Errors are OpenAI-shaped like the rest of
the gateway (invalid input: 400, unknown tenant/key/entry: 404, duplicate: 409).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request, Response
from pydantic import BaseModel

from gateway.admin.audit import AuditLog
from gateway.admin.auth import require_admin
from gateway.admin.body_check import AdminRoute
from gateway.admin.cache import CacheAdmin
from gateway.admin.explain import Explainer
from gateway.admin.policies import PolicyAdmin, policy_etag
from gateway.admin.schemas import (
    NO_NUL,
    AuditList,
    AuditOut,
    CacheEntryList,
    CacheStats,
    ExplainRequest,
    ExplainResponse,
    InvalidateResult,
    KeyCreate,
    KeyIssued,
    KeyList,
    KeyOut,
    PolicyHistory,
    PolicyOut,
    TenantCreate,
    TenantDeleted,
    TenantList,
    TenantOut,
    TenantUpdate,
)
from gateway.admin.service import TenantAdmin
from gateway.policy import TenantPolicy
from gateway.proxy.access import state
from gateway.proxy.ratelimit import RateLimiter
from gateway.tenants import TenantContext
from semantic.store_rows import SemanticRows

# Largest ids the columns hold (INTEGER on PostgreSQL for keys and audit events, BIGINT
# for semantic entries); a larger value is refused with a 400 before the database sees it.
MAX_ID = 2**31 - 1
MAX_ENTRY_ID = 2**63 - 1


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(BaseModel):
    error: ErrorDetail


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in (
        (400, "Invalid input"),
        (401, "No admin token, or a wrong one"),
        (403, "A tenant API key, or the admin API is disabled (no CACHEGATE_ADMIN_TOKEN)"),
        (404, "Unknown tenant, key or entry"),
        (409, "Conflict: already exists, or changed concurrently"),
        (412, "If-Match names a policy version that is no longer the latest"),
        (503, "The database is unavailable"),
    )
}

# AdminRoute: a database that cannot answer is the declared 503, on every route, and a
# body JSON cannot write back (a lone surrogate, 1e400) a 400 before the route runs.
router = APIRouter(
    prefix="/admin",
    tags=["admin"],
    dependencies=[Depends(require_admin)],
    responses=_ERRORS,
    route_class=AdminRoute,
)

Actor = Annotated[str, Depends(require_admin)]
# NO_NUL: PostgreSQL text cannot hold NUL, so such a value is a 400 here instead of a
# database error; no stored id is longer than 64 characters.
TenantId = Annotated[str, Path(max_length=64, pattern=NO_NUL, description="The tenant's id")]


def limiter(request: Request) -> RateLimiter | None:
    found: RateLimiter | None = getattr(request.app.state, "rate_limiter", None)
    return found


def rows(request: Request) -> SemanticRows | None:
    """The semantic rows where this replica's semantic layer is off (gateway/app.py)."""
    found: SemanticRows | None = getattr(request.app.state, "semantic_rows", None)
    return found


def tenants(request: Request) -> TenantAdmin:
    gw = state(request)
    return TenantAdmin(gw.tenants, gw.pipeline.cache, limiter(request), rows=rows(request))


def policies(request: Request) -> PolicyAdmin:
    return PolicyAdmin(state(request).tenants)


def caches(request: Request) -> CacheAdmin:
    gw = state(request)
    return CacheAdmin(
        gw.tenants, gw.pipeline.cache, gw.metrics, limiter(request), rows=rows(request)
    )


# ---- tenants ---------------------------------------------------------------------------
@router.post("/tenants", status_code=201, response_model=TenantOut)
async def create_tenant(request: Request, actor: Actor, body: TenantCreate) -> TenantOut:
    return await asyncio.to_thread(tenants(request).create, actor, body)


@router.get("/tenants", response_model=TenantList)
async def list_tenants(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_ENTRY_ID)] = 0,
) -> TenantList:
    rows = await asyncio.to_thread(tenants(request).list_tenants, limit, offset)
    return TenantList(data=rows)


@router.get("/tenants/{tenant_id}", response_model=TenantOut)
async def get_tenant(request: Request, tenant_id: TenantId) -> TenantOut:
    return await asyncio.to_thread(tenants(request).get, tenant_id)


@router.patch("/tenants/{tenant_id}", response_model=TenantOut)
async def update_tenant(
    request: Request, actor: Actor, tenant_id: TenantId, body: TenantUpdate
) -> TenantOut:
    return await asyncio.to_thread(tenants(request).rename, actor, tenant_id, body.name)


@router.post("/tenants/{tenant_id}/disable", response_model=TenantOut)
async def disable_tenant(request: Request, actor: Actor, tenant_id: TenantId) -> TenantOut:
    """The tenant's keys get 403 from its next request on (data is kept)."""
    return await asyncio.to_thread(tenants(request).set_disabled, actor, tenant_id, True)


@router.post("/tenants/{tenant_id}/enable", response_model=TenantOut)
async def enable_tenant(request: Request, actor: Actor, tenant_id: TenantId) -> TenantOut:
    return await asyncio.to_thread(tenants(request).set_disabled, actor, tenant_id, False)


@router.delete("/tenants/{tenant_id}", response_model=TenantDeleted)
async def delete_tenant(request: Request, actor: Actor, tenant_id: TenantId) -> TenantDeleted:
    """Deletes the tenant with its keys, policy versions, misfire samples, request
    stats and semantic cache entries. The audit log keeps its history."""
    entries, keys, versions = await asyncio.to_thread(tenants(request).delete, actor, tenant_id)
    gw = request.app.state.gateway
    if gw.stats is not None:  # its recent prompts feed the anti-pattern report
        gw.stats.prompts.forget(tenant_id)
    gw.metrics.forget_tenant(tenant_id)  # other replicas: through the change feed
    if gw.pipeline.verification is not None:  # a re-created id starts from the shipped cut
        gw.pipeline.verification.calibrator.invalidate(tenant_id)
    return TenantDeleted(
        id=tenant_id,
        semantic_entries_removed=entries,
        keys_removed=keys,
        policy_versions_removed=versions,
    )


# ---- API keys --------------------------------------------------------------------------
@router.post("/tenants/{tenant_id}/keys", status_code=201, response_model=KeyIssued)
async def issue_key(
    request: Request, actor: Actor, tenant_id: TenantId, body: KeyCreate | None = None
) -> KeyIssued:
    """A new API key; the raw key is in this response only (stored as a hash)."""
    name = body.name if body is not None else ""
    return await asyncio.to_thread(tenants(request).issue_key, actor, tenant_id, name)


@router.get("/tenants/{tenant_id}/keys", response_model=KeyList)
async def list_keys(request: Request, tenant_id: TenantId) -> KeyList:
    return KeyList(data=await asyncio.to_thread(tenants(request).list_keys, tenant_id))


@router.delete("/tenants/{tenant_id}/keys/{key_id}", response_model=KeyOut)
async def revoke_key(
    request: Request,
    actor: Actor,
    tenant_id: TenantId,
    key_id: Annotated[int, Path(ge=1, le=MAX_ID)],
) -> KeyOut:
    """Revokes the key (idempotent): refused with 401 from its next request on."""
    return await asyncio.to_thread(tenants(request).revoke_key, actor, tenant_id, key_id)


# ---- policies --------------------------------------------------------------------------
# The version as an ETag, and If-Match on writes: an operator's read-modify-write
# never overwrites another's change unseen (gateway/admin/policies.py).
IfMatch = Annotated[
    str | None,
    Header(
        max_length=1024,
        description='Write only if the latest version is this ETag (e.g. "3"); else 412',
    ),
]


@router.get("/tenants/{tenant_id}/policy", response_model=PolicyOut)
async def get_policy(request: Request, response: Response, tenant_id: TenantId) -> PolicyOut:
    out = await asyncio.to_thread(policies(request).policy, tenant_id)
    response.headers["ETag"] = policy_etag(out.version)
    return out


@router.put("/tenants/{tenant_id}/policy", response_model=PolicyOut)
async def put_policy(
    request: Request,
    response: Response,
    actor: Actor,
    tenant_id: TenantId,
    policy: TenantPolicy,
    if_match: IfMatch = None,
) -> PolicyOut:
    """Replaces the whole policy (omitted fields take their defaults) as a new version."""
    admin = policies(request)
    out = await asyncio.to_thread(admin.set_policy, actor, tenant_id, policy, if_match)
    response.headers["ETag"] = policy_etag(out.version)
    return out


@router.patch("/tenants/{tenant_id}/policy", response_model=PolicyOut)
async def patch_policy(
    request: Request,
    response: Response,
    actor: Actor,
    tenant_id: TenantId,
    changes: Annotated[
        dict[str, Any],
        Body(description="Fields of the policy to change; the result is validated whole"),
    ],
    if_match: IfMatch = None,
) -> PolicyOut:
    admin = policies(request)
    out = await asyncio.to_thread(admin.patch_policy, actor, tenant_id, changes, if_match)
    response.headers["ETag"] = policy_etag(out.version)
    return out


@router.get("/tenants/{tenant_id}/policy/history", response_model=PolicyHistory)
async def policy_history(
    request: Request, tenant_id: TenantId, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> PolicyHistory:
    rows = await asyncio.to_thread(policies(request).history, tenant_id, limit)
    return PolicyHistory(data=rows)


# ---- cache operations ------------------------------------------------------------------
@router.get("/tenants/{tenant_id}/cache/entries", response_model=CacheEntryList)
async def list_entries(
    request: Request,
    tenant_id: TenantId,
    partition_key: Annotated[str | None, Query(max_length=64, pattern=NO_NUL)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> CacheEntryList:
    rows = await asyncio.to_thread(caches(request).entries, tenant_id, partition_key, limit)
    return CacheEntryList(data=rows)


@router.delete("/tenants/{tenant_id}/cache", response_model=InvalidateResult)
async def invalidate_tenant_cache(
    request: Request, actor: Actor, tenant_id: TenantId
) -> InvalidateResult:
    """Removes every semantic cache entry of the tenant."""
    return await asyncio.to_thread(caches(request).invalidate_all, actor, tenant_id)


@router.delete(
    "/tenants/{tenant_id}/cache/partitions/{partition_key}", response_model=InvalidateResult
)
async def invalidate_partition(
    request: Request,
    actor: Actor,
    tenant_id: TenantId,
    partition_key: Annotated[str, Path(max_length=64, pattern=NO_NUL)],
) -> InvalidateResult:
    """Removes the tenant's entries in one partition (another tenant's: nothing)."""
    return await asyncio.to_thread(
        caches(request).invalidate_partition, actor, tenant_id, partition_key
    )


@router.delete("/tenants/{tenant_id}/cache/entries/{entry_id}", response_model=InvalidateResult)
async def invalidate_entry(
    request: Request,
    actor: Actor,
    tenant_id: TenantId,
    entry_id: Annotated[int, Path(ge=1, le=MAX_ENTRY_ID)],
) -> InvalidateResult:
    """Removes one entry; 404 unless it is this tenant's."""
    return await asyncio.to_thread(caches(request).invalidate_entry, actor, tenant_id, entry_id)


@router.get("/tenants/{tenant_id}/cache/stats", response_model=CacheStats)
async def cache_stats(request: Request, tenant_id: TenantId) -> CacheStats:
    """Semantic entries (database) and this replica's counters: requests by outcome,
    semantic hits and misses by reason, prefix tokens queried and reused."""
    gw = state(request)
    policy, version = await asyncio.to_thread(gw.tenants.policy, tenant_id)
    minted = await asyncio.to_thread(gw.tenants.namespace_id, tenant_id)
    namespace = TenantContext(tenant_id, tenant_id, policy, version, minted).prefix_namespace
    return await asyncio.to_thread(caches(request).stats, tenant_id, namespace)


@router.post("/tenants/{tenant_id}/cache/explain", response_model=ExplainResponse)
async def explain(request: Request, tenant_id: TenantId, body: ExplainRequest) -> ExplainResponse:
    """Dry-run lookup: would this request hit the semantic cache, and if not, why?
    Reads only: nothing is served or counted."""
    gw = state(request)
    explainer = Explainer(gw.tenants, gw.pipeline, gw.upstream.models())
    return await explainer.explain(tenant_id, body)


# ---- audit -----------------------------------------------------------------------------
@router.get("/audit", response_model=AuditList)
async def audit_log(
    request: Request,
    tenant: Annotated[str | None, Query(max_length=64, pattern=NO_NUL)] = None,
    action: Annotated[str | None, Query(max_length=64, pattern=NO_NUL)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> AuditList:
    """Admin actions, newest first; ``before_id`` pages backwards."""
    log = AuditLog(state(request).tenants.sessions)
    rows = await asyncio.to_thread(
        log.list, tenant_id=tenant, action=action, limit=limit, before_id=before_id
    )
    return AuditList(data=[AuditOut(**vars(r)) for r in rows])
