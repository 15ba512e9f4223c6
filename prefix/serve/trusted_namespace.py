"""Which prefix namespace a request to the engine server runs in.

The namespace comes only from the trusted header ``x-cachegate-namespace``, and
only when the same request carries ``x-cachegate-engine-key`` equal to the
server's key (constant-time comparison). Otherwise the header is ignored and
the request runs in the shared ``"default"`` namespace; this never fails the
request. The gateway sends both headers (``gateway/proxy/http_upstream.py``), and with
them whose request it is (an opaque digest of the tenant: the engine shares its running
slots and waiting queue per tenant, not per namespace, which a tenant whose end users
each have a namespace would multiply) and the tenant's KV block quota, honoured only
with the key too (:func:`resolve_tenant`).
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Mapping

from protocol.headers import (
    DEFAULT_NAMESPACE,
    KEY_HEADER,
    NAMESPACE_HEADER,
    QUOTA_HEADER,
    TENANT_HEADER,
)
from protocol.http import header_int

__all__ = [
    "DEFAULT_NAMESPACE",
    "KEY_HEADER",
    "NAMESPACE_HEADER",
    "resolve_namespace",
    "resolve_tenant",
]

log = logging.getLogger("cachegate.prefix.server")


def resolve_namespace(headers: Mapping[str, str], trusted_key: str | None) -> str:
    """The tenant namespace of a request: the trusted header, or ``"default"``."""
    namespace = headers.get(NAMESPACE_HEADER)
    if not namespace or trusted_key is None:
        return DEFAULT_NAMESPACE
    if not _has_key(headers, trusted_key):
        log.warning("namespace header without a valid engine key: using the default namespace")
        return DEFAULT_NAMESPACE
    return namespace


def resolve_tenant(
    headers: Mapping[str, str], trusted_key: str | None
) -> tuple[str | None, int | None]:
    """(whose request it is, that tenant's KV block quota) from the trusted headers the
    gateway sends with the engine key; (None, None) without a valid key. A malformed
    value is ignored (only the gateway, which holds the key, sends them)."""
    if trusted_key is None or not _has_key(headers, trusted_key):
        return None, None
    tenant = headers.get(TENANT_HEADER)
    if tenant is not None and not _TENANT.fullmatch(tenant):
        tenant = None
    quota_text = headers.get(QUOTA_HEADER)
    quota = header_int(quota_text)  # ASCII digits only: "²".isdigit() was a 500
    if quota is not None and not 1 <= quota <= MAX_QUOTA:
        quota = None
    return tenant, quota


def _has_key(headers: Mapping[str, str], trusted_key: str) -> bool:
    if not trusted_key:  # an empty key is none: "" against an empty header matched
        return False
    key = headers.get(KEY_HEADER)
    # Starlette decodes header bytes as latin-1: encoding back gives the raw bytes.
    given = (key or "").encode("latin-1", "replace")
    return key is not None and hmac.compare_digest(given, trusted_key.encode("utf-8"))


_TENANT = re.compile(r"[0-9a-f]{16,64}")
MAX_QUOTA = 2**31 - 1
