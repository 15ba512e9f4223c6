"""Every error the gateway answers, in the OpenAI shape: its own ``GatewayError``s
(gateway/errors.py), Starlette's HTTP errors (404, 405 with its ``Allow``), request
validation (a 400 naming the parameter, never quoting its value) and anything
unforeseen (a 500 naming only the exception's type; the traceback goes to the log).
Every error response carries the request's id (the client's X-Request-Id when well
formed, else the gateway's), as every answer does: an SDK reports it with the error;
and, once the request took a rate-limit token, the tenant's x-ratelimit-*-requests.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway.admin.schemas import validation_message
from gateway.errors import GatewayError
from gateway.proxy.access import shadowed_limit_headers
from gateway.proxy.controls import request_id
from gateway.proxy.upstream import RELAYED_STATUSES

log = logging.getLogger("cachegate.gateway")


def install_error_handlers(app: FastAPI) -> None:
    def _ids(
        request: Request, headers: Mapping[str, str] | None = None, status: int = 0
    ) -> dict[str, str]:
        kept = {k: v for k, v in (headers or {}).items() if k.lower() != "x-request-id"}
        # A request that took a rate-limit token says where the tenant's bucket stands,
        # failed or not (gateway/proxy/routes.py). An error the upstream sent with its own
        # limits (a 429 or 503 of the shared account) keeps them: they explain the
        # refusal, and "58 remaining" beside its Retry-After would invite a retry at once.
        # On any other error the tenant's own stand in their place, as on an answer
        # (access.with_limit_headers): an upstream's 400 is no news of its limits.
        limits = getattr(request.state, "rate_limit_headers", None) or {}
        if status in RELAYED_STATUSES:
            said = {k.lower() for k in kept}
            mine = {k: v for k, v in limits.items() if k.lower() not in said}
            return kept | mine | {"X-Request-Id": request_id(request)}
        shadowed = shadowed_limit_headers(request) | {k.lower() for k in limits}
        kept = {k: v for k, v in kept.items() if k.lower() not in shadowed}
        return kept | dict(limits) | {"X-Request-Id": request_id(request)}

    @app.exception_handler(GatewayError)
    async def _gateway_error(request: Request, exc: GatewayError) -> Response:
        headers = _ids(request, exc.headers, exc.status)
        if exc.raw is not None:  # the upstream's error body, as it sent it
            return Response(exc.raw, exc.status, headers=headers, media_type=exc.media_type)
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        body = {"error": {"message": str(exc.detail), "type": kind, "param": None, "code": None}}
        # exc.headers: a 405's Allow
        return JSONResponse(body, status_code=exc.status_code, headers=_ids(request, exc.headers))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        message, param = validation_message(exc.errors())
        body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": param,
                "code": None,
            }
        }
        return JSONResponse(body, status_code=400, headers=_ids(request))

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s", request.url.path)
        body = {
            "error": {
                "message": f"internal error: {type(exc).__name__}",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        }
        return JSONResponse(body, status_code=500, headers=_ids(request))
