"""Errors raised while reading a request against the wire protocol (torch-free).

Hierarchy::

    ProtocolError
    ├── ApiError (status, type, param, code)           answered in the OpenAI error shape
    └── InvalidSamplingParamsError (also ValueError)   max_tokens <= 0, temperature out of
                                                       [0, 2], top_p out of (0, 1], bad stops

The engine (``prefix.errors``) re-exports ``InvalidSamplingParamsError`` so its callers
see one class; both the engine server and the gateway answer it with a 400 naming the
parameter (its message starts with the parameter's name).
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse


class ProtocolError(Exception):
    """Base class of the errors raised by ``protocol``."""


class InvalidSamplingParamsError(ProtocolError, ValueError):
    """A sampling parameter is out of range."""


def error_body(
    message: str, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """The OpenAI error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class ApiError(ProtocolError):
    """An error answered in the OpenAI shape. Messages never quote user text."""

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}  # e.g. Retry-After on a 429

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)
