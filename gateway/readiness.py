"""``GET /ready``: whether this replica should get traffic now.

Ready when the upstream answers, the gateway database answers a ping within
``READY_PING_SECONDS`` (one that hangs is not ready: its thread runs on, and no second
ping starts until it returns, gateway/db_rest.py) and the Chinese pair verifier, loading
in the background at start (gateway/verification.py ``warm_chinese``), is in: its first
lookups would otherwise wait seconds for it, past their deadline on a busy host, and be
skipped. The semantic store's health is shown, not required (the layer fails open).
The checks run together, so a database that hangs costs one ping deadline per check.
A ping that answers also ends the key store's rest after a hang.
"""

from __future__ import annotations

import asyncio
import threading

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import text

from gateway.db_rest import DbDeadlineError, Probe
from gateway.state import GatewayState

READY_PING_SECONDS = 3.0


async def readiness(db_probe: Probe, request: Request) -> Response:
    gw: GatewayState = request.app.state.gateway
    upstream, database, store = await asyncio.gather(
        gw.upstream.is_ready(),
        db_ok_within(db_probe, request.app.state.db),
        gw.pipeline.check_store(),
    )
    warming: threading.Thread | None = getattr(request.app.state, "warming", None)
    verifier = warming is None or not warming.is_alive()
    checks = {
        "upstream": upstream,
        "database": database,
        "semantic_store": store,
        "verifier_loaded": verifier,
    }
    if database:  # it answers: authentication need not rest out its backoff
        gw.tenants.rest.succeeded()
    ok = upstream and database and verifier
    return JSONResponse({"ready": ok, "checks": checks}, status_code=200 if ok else 503)


async def db_ok_within(probe: Probe, db: object) -> bool:
    """The database answers a ping within ``READY_PING_SECONDS``."""
    try:
        return await probe.run(READY_PING_SECONDS, db_ok, db)
    except DbDeadlineError:
        return False


def db_ok(db: object) -> bool:
    try:
        with db.connect() as conn:  # type: ignore[attr-defined]
            conn.execute(text("SELECT 1"))
        return True
    except Exception:
        return False
