"""Who may read ``/metrics``: a bearer token, compared in constant time.

``/metrics`` shows per-tenant traffic (tenant labels are digests unless an
operator asks for ids, :mod:`gateway.metrics`) and the engine's pool state, so
a deployment reachable by clients sets ``CACHEGATE_METRICS_TOKEN`` and gives it
to Prometheus (``authorization: {credentials: ...}`` in the scrape config).
Without a token the route stays open: that suits ``make serve`` on a laptop,
not a shared network. A separate metrics port was the alternative; a token
keeps one listener, one TLS setup and works the same behind any proxy.
"""

from __future__ import annotations

import hmac

from fastapi import Request
from pydantic import SecretStr

from gateway.errors import AuthenticationError


def require_metrics_token(request: Request, token: SecretStr | None) -> None:
    """Raise 401 unless ``token`` is None or the request carries it as a bearer token."""
    if token is None:
        return
    scheme, _, given = (request.headers.get("authorization") or "").partition(" ")
    expected = token.get_secret_value().encode("utf-8")
    # An empty token set (CACHEGATE_METRICS_TOKEN=) closes /metrics, as an empty admin
    # token closes the admin API: a bare "Bearer" matched it (a review, session 41).
    if (
        not expected
        or scheme.lower() != "bearer"
        or not hmac.compare_digest(given.strip().encode("utf-8"), expected)
    ):
        raise AuthenticationError(
            "metrics need 'Authorization: Bearer <CACHEGATE_METRICS_TOKEN>'",
            code="invalid_metrics_token",
        )
