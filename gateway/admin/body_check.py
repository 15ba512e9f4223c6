"""Admin request bodies that cannot be stored are a 400 before any route runs.

FastAPI decodes an admin body with ``json.loads``, which accepts a lone surrogate
escape (``"\\udc00"``) and a number too large for a float (``1e400``). Pydantic lets
both through a ``str`` or ``float`` field, the route stores them, and every later read
of that value fails as a 500 when the response is encoded: a policy written with such
an allowlist topic broke ``GET .../policy/history`` and ``GET /admin/audit`` for good.
The proxy routes refuse these bodies in ``protocol.http.read_json``; this route class
applies the same check (``check_json_value``) to every admin, review and report route.

Every body is parsed for it, as small as admin bodies are: until session 43 only those
whose bytes could spell such a value (a surrogate escape, an exponent, ``NaN``) were,
and a UTF-16 body (``json.loads`` reads UTF-16 and -32 too) spells them with NULs
between, a long decimal (``1`` and 400 zeros) is infinite without an exponent: both
were stored (a review). A body in another encoding than UTF-8 is refused outright
(RFC 8259: JSON exchanged between systems is UTF-8), as ``read_json`` refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.admin.auth import require_admin
from gateway.admin.unavailable import DatabaseErrorsRoute
from gateway.errors import BadRequestError, GatewayError, PayloadTooLargeError
from protocol.errors import ApiError
from protocol.http import BODY_TIMEOUT_SECONDS, check_json_value, read_body

#: An admin body's limit when the app names none (``CACHEGATE_ADMIN_MAX_BODY_BYTES``'s
#: default).
MAX_BODY = 1_000_000


class AdminRoute(DatabaseErrorsRoute):
    """:class:`DatabaseErrorsRoute` that first refuses a body JSON cannot write back."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            if request.method in ("POST", "PUT", "PATCH"):
                # Who asks first, then a bounded read: an anonymous body of any size was
                # read and parsed before the route's token check ran (a review: 300 MiB,
                # +686 MB of memory, then a 400), and admin bodies had no limit at all.
                await require_admin(request, None)
                limit = getattr(request.app.state, "admin_max_body_bytes", None) or MAX_BODY
                timeout = getattr(request.app.state, "body_timeout", BODY_TIMEOUT_SECONDS)
                try:
                    body = await read_body(request, limit, timeout)
                except ApiError as err:  # 413 or 408, in the OpenAI shape
                    raise _refused(err) from None
                request._body = body  # what the route reads (Starlette keeps it there)
                check_body(body)
            return await handler(request)

        return handle


def _refused(err: ApiError) -> GatewayError:
    if err.status == 413:
        return PayloadTooLargeError(err.message, code=err.code)
    refused = BadRequestError(err.message, code=err.code, headers=err.headers)
    refused.status = err.status  # 408: the body did not arrive in time
    return refused


def check_body(body: bytes) -> None:
    """Raise a 400 :class:`BadRequestError` if ``body`` is not UTF-8 or holds a value that
    strict JSON and UTF-8 cannot give back; anything else (not JSON at all, too) is the
    route's."""
    if not body.strip():
        return
    if json.detect_encoding(body) not in ("utf-8", "utf-8-sig"):
        raise BadRequestError("the request body is not UTF-8", code="invalid_value")
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested past json's own limit:
        return  # FastAPI answers that itself (a 400), as it did before this check
    try:
        check_json_value(value)
    except ApiError as err:
        raise BadRequestError(err.message, code="invalid_value") from None
