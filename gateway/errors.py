"""Errors the gateway raises, each mapped to an OpenAI-shaped HTTP error.

Hierarchy::

    GatewayError (status, type, code)
    ├── BadRequestError            400 invalid_request_error   malformed body, bad parameters
    ├── AuthenticationError        401 invalid_request_error   missing / unknown / revoked key
    ├── PermissionDeniedError      403 permission_error        disabled tenant, admin-only route
    ├── NotFoundError              404 invalid_request_error   unknown model, tenant, entry
    ├── PayloadTooLargeError       413 invalid_request_error   body over the size limit
    ├── RateLimitError             429 rate_limit_error        per-tenant requests/min exceeded
    ├── UpstreamError              502 upstream_error          upstream refused or broke the stream
    │   └── UpstreamTimeoutError   504 upstream_error          no answer in time
    └── ServiceUnavailableError    503 service_unavailable     not ready, database down for auth

Library errors (``prefix.errors``, ``semantic.errors``, ``validators.errors``)
are translated where they are caught; none reaches a client as a 500.
"""

from __future__ import annotations

from typing import Any


class GatewayError(Exception):
    status = 500
    type = "server_error"
    # An upstream's own error body, when it goes back to the client as the bytes it
    # sent (``gateway/proxy/relay.py``): the client gets them, not ``body()`` re-encoded.
    raw: bytes | None = None
    media_type = "application/json"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class BadRequestError(GatewayError):
    status = 400
    type = "invalid_request_error"


class AuthenticationError(GatewayError):
    status = 401
    type = "invalid_request_error"


class PermissionDeniedError(GatewayError):
    status = 403
    type = "permission_error"


class NotFoundError(GatewayError):
    status = 404
    type = "invalid_request_error"


class PayloadTooLargeError(GatewayError):
    status = 413
    type = "invalid_request_error"


class RateLimitError(GatewayError):
    status = 429
    type = "rate_limit_error"


class UpstreamError(GatewayError):
    status = 502
    type = "upstream_error"


class UpstreamTimeoutError(UpstreamError):
    status = 504


class ServiceUnavailableError(GatewayError):
    status = 503
    type = "service_unavailable"
