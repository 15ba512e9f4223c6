"""The backfill's store step, under the cache's write lock (torch-free, no I/O of its
own beyond the cache and the tenant lookup it is given).

The answer is stored only once the tenant's bounds have room for it, and only while
the tenant is the one the request authenticated as: checked before the store under
this process's write lock, and again once the entry is committed, since a delete
through another replica does not take that lock. A check after the commit that the
database cannot answer takes the entry back out too (``SemanticCache.withdraw``): a
delete whose sweeps ran before the commit would leave it under the tenant id, listed
and counted as the tenant's if the id is created again (until session 52 it was kept).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import exc as sa_exc

from gateway.proxy.semantic_limits import make_room
from gateway.tenants import TenantContext
from semantic import SemanticCache, SemanticPolicy, SemanticQuery
from semantic.errors import StoreUnavailableError
from semantic.results import StoreResult
from semantic.storable import store_skip_reason

log = logging.getLogger("cachegate.gateway")

#: Seconds a backfill waits for the cache's write lock: a rebuild or an index snapshot
#: holds it for seconds to minutes, and the answer is then skipped (``busy``) rather
#: than kept from the client (a non-streamed miss waits for its backfill's header).
BACKFILL_LOCK_WAIT = 1.0


def store_within_bounds(
    cache: SemanticCache,
    ctx: TenantContext,
    query: SemanticQuery,
    key: str,
    response: dict[str, Any],
    sem: SemanticPolicy,
    embedding: Any,
    minted_id: Callable[[str], str] | None = None,
    asked_at: datetime | None = None,
) -> StoreResult:
    """Store the answer once the tenant's bounds have room for it, or say why not.

    Whether the store would keep it is asked first: a truncated or refused answer, or a
    guarded question, must not evict the oldest good entries to make room. The room is
    made and the answer stored under one hold of the write lock, so two backfills of a
    tenant at its bound cannot both find the last free place; the hold is bounded (a
    rebuild or snapshot holds the lock for long) and the answer is skipped as busy."""
    skip = store_skip_reason(cache, query, response, sem)
    if skip is not None:
        return StoreResult(False, key, reason=skip)
    with cache.writing(BACKFILL_LOCK_WAIT) as taken:
        if not taken:
            return StoreResult(False, key, reason="busy")
        if minted_id is not None and not still_minted(minted_id, ctx):
            # Deleted (and maybe re-created) since the request was authenticated: its
            # entry would be listed, and counted, as the new tenant's.
            return StoreResult(False, key, reason="tenant_deleted")
        skip = make_room(cache, ctx.tenant_id, key, ctx.policy, query.question)
        if skip is not None:
            return StoreResult(False, key, reason=skip)
        # the lock is reentrant: the store takes it again inside without waiting
        result = cache.store(
            query, response, sem, embedding=embedding, partition_key=key, asked_at=asked_at
        )
        if result.stored and minted_id is not None and result.entry_id is not None:
            # The write lock is this process's: a delete through another replica can
            # commit between the check above and the store. Checked again once the entry
            # is committed, the two orders are covered: a delete committed before this
            # read is seen here (the entry goes), one committed after it runs its second
            # entry sweep after the entry was committed (TenantAdmin.delete).
            def is_orphan(minted: Callable[[str], str] = minted_id) -> bool:
                return not still_minted(minted, ctx)

            try:
                orphan = is_orphan()
            except StoreUnavailableError:
                # Unknown: the entry goes (a miss later, never a wrong owner), or, when
                # its delete fails too, waits out of the index for the database.
                log.warning("could not re-check the tenant after a backfill; withdrawing it")
                cache.withdraw(result.entry_id, key, ctx.tenant_id, asked_at, is_orphan)
                raise
            if orphan:
                cache.withdraw(result.entry_id, key, ctx.tenant_id, asked_at, lambda: True)
                return StoreResult(False, key, reason="tenant_deleted")
        return result


def still_minted(minted_id: Callable[[str], str], ctx: TenantContext) -> bool:
    """Whether the tenant is still the one the request authenticated as. A database that
    cannot say is the store being away (the answer is then not stored: never a wrong
    owner), reported as such so the backfill counts and shows the outage."""
    try:
        return minted_id(ctx.tenant_id) == ctx.namespace_id
    except sa_exc.SQLAlchemyError as exc:
        raise StoreUnavailableError("the tenant database did not answer") from exc
