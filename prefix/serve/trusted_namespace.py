"""Which prefix namespace a request to the engine server runs in.

The namespace comes only from the trusted header ``x-cachegate-namespace``, and
only when the same request carries ``x-cachegate-engine-key`` equal to the
server's key (constant-time comparison). Otherwise the header is ignored and
the request runs in the shared ``"default"`` namespace; this never fails the
request. The gateway sends both headers (``gateway/proxy/http_upstream.py``).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping

from protocol.headers import DEFAULT_NAMESPACE, KEY_HEADER, NAMESPACE_HEADER

__all__ = ["DEFAULT_NAMESPACE", "KEY_HEADER", "NAMESPACE_HEADER", "resolve_namespace"]

log = logging.getLogger("cachegate.prefix.server")


def resolve_namespace(headers: Mapping[str, str], trusted_key: str | None) -> str:
    """The tenant namespace of a request: the trusted header, or ``"default"``."""
    namespace = headers.get(NAMESPACE_HEADER)
    if not namespace or trusted_key is None:
        return DEFAULT_NAMESPACE
    key = headers.get(KEY_HEADER)
    # Starlette decodes header bytes as latin-1: encoding back gives the raw bytes.
    given = (key or "").encode("latin-1", "replace")
    if key is None or not hmac.compare_digest(given, trusted_key.encode("utf-8")):
        log.warning("namespace header without a valid engine key: using the default namespace")
        return DEFAULT_NAMESPACE
    return namespace
