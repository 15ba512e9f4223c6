"""Who may call ``/admin``: the holder of ``CACHEGATE_ADMIN_TOKEN``, and nobody else.

``Authorization: Bearer <admin token>``; the token is compared in constant time
(SHA-256 of both sides, then ``hmac.compare_digest``).

* no token configured  → 403 for every admin route (set CACHEGATE_ADMIN_TOKEN);
* no bearer token      → 401;
* a tenant's API key   → 403 (a valid credential, but not for this route);
* any other token      → 401.

The actor written to the audit log is ``admin``, or ``admin:<name>`` when the
request names the person with ``X-Admin-Actor`` (letters, digits, ``._@-``,
at most 64 characters; anything else is dropped). The name is informational:
it is only accepted alongside the admin token.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
from collections import OrderedDict
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import SecretStr
from sqlalchemy import exc as sa_exc

from gateway.errors import AuthenticationError, PermissionDeniedError
from gateway.proxy.access import bearer, state
from gateway.tenants import MAX_KEY_CHARS, hash_key

ACTOR_HEADER = "x-admin-actor"
_ACTOR_CHARS = re.compile(r"[^A-Za-z0-9._@-]")

#: Declares the scheme in the OpenAPI document; the check itself is ``require_admin``.
admin_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="The gateway's admin token (CACHEGATE_ADMIN_TOKEN), not a tenant API key.",
)


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8")).digest()


def token_matches(given: str, expected: str) -> bool:
    return hmac.compare_digest(_digest(given), _digest(expected))


def actor_name(request: Request) -> str:
    raw = request.headers.get(ACTOR_HEADER) or ""
    name = _ACTOR_CHARS.sub("", raw)[:64]
    return f"admin:{name}" if name else "admin"


async def require_admin(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(admin_bearer)],
) -> str:
    """The audit actor of an authorized admin request; raises 401/403 otherwise."""
    configured: SecretStr | None = getattr(request.app.state, "admin_token", None)
    expected = configured.get_secret_value() if configured is not None else ""
    if not expected:
        raise PermissionDeniedError(
            "the admin API is disabled: set CACHEGATE_ADMIN_TOKEN to enable it",
            code="admin_api_disabled",
        )
    token = bearer(request)
    if token is None:
        raise AuthenticationError(
            "missing admin token: send 'Authorization: Bearer <CACHEGATE_ADMIN_TOKEN>'",
            code="invalid_admin_token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if token_matches(token, expected):
        return actor_name(request)
    if await _is_tenant_key(request, token):
        raise PermissionDeniedError(
            "a tenant API key cannot be used on admin routes; use the admin token",
            code="tenant_key_not_allowed",
        )
    raise AuthenticationError(
        "invalid admin token", code="invalid_admin_token", headers={"WWW-Authenticate": "Bearer"}
    )


async def _is_tenant_key(request: Request, token: str) -> bool:
    """Whether ``token`` is (or was) a tenant's API key, for the 403's hint. Bounded as
    ``/v1`` authentication is: a token longer than any key is not one, and a token
    found not to be a key is remembered, so repeating a wrong token costs the
    database nothing (each one distinct costs one read, as on ``/v1``)."""
    if len(token) > MAX_KEY_CHARS:
        return False
    misses = _probe_misses(request)
    digest = hash_key(token)
    if digest in misses:
        misses.move_to_end(digest)
        return False
    try:
        found = await asyncio.to_thread(state(request).tenants.has_key, token)
    except sa_exc.SQLAlchemyError:
        return False  # cannot tell: the plain 401 is still the right answer
    if not found:
        misses[digest] = None
        while len(misses) > _MAX_PROBE_MISSES:
            misses.popitem(last=False)
    return found


#: Wrong admin tokens remembered per app (digests only; least recently seen dropped).
_MAX_PROBE_MISSES = 10_000


def _probe_misses(request: Request) -> OrderedDict[str, None]:
    found: OrderedDict[str, None] | None = getattr(request.app.state, "admin_probe_misses", None)
    if found is None:
        found = request.app.state.admin_probe_misses = OrderedDict()
    return found
