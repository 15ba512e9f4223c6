"""A database outage on an admin route is a 503, never a 500.

The admin routes read and write the tenant database through SQLAlchemy, and the
semantic store through :class:`~semantic.SemanticCache`. When either cannot answer
(down, refusing, a lock or statement timeout, no pooled connection free in time),
the route class here turns the error into the gateway's
:class:`~gateway.errors.ServiceUnavailableError`: the OpenAI error shape with a fixed
message. The database's own message names its URL and may quote a statement, so it
stays in the exception chain (logs), never in the response body.

One place for every admin route, whatever service it calls and whatever that service
catches itself: ``APIRouter(route_class=DatabaseErrorsRoute)``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import ServiceUnavailableError
from gateway.tenants import DB_UNAVAILABLE
from semantic.errors import StoreUnavailableError

_CAUGHT: tuple[type[Exception], ...] = (*DB_UNAVAILABLE, StoreUnavailableError)

DATABASE_UNAVAILABLE = "the database is unavailable; try again shortly"
STORE_UNAVAILABLE = "the semantic store is unavailable"


def unavailable(exc: Exception) -> ServiceUnavailableError:
    """The 503 for ``exc`` (raise it ``from exc``, so that logs keep the cause)."""
    message = STORE_UNAVAILABLE if isinstance(exc, StoreUnavailableError) else DATABASE_UNAVAILABLE
    return ServiceUnavailableError(message)


class DatabaseErrorsRoute(APIRoute):
    """An :class:`APIRoute` whose handler (dependencies, endpoint and response) answers
    503 for a database that cannot answer."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except _CAUGHT as exc:
                raise unavailable(exc) from exc

        return handle
