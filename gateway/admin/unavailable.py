"""A database outage on an admin route is a 503, never a 500.

The admin routes read and write the tenant database through SQLAlchemy, and the
semantic store through :class:`~semantic.SemanticCache`. When either cannot answer
(down, refusing, a lock or statement timeout, no pooled connection free in time),
the route class here turns the error into the gateway's
:class:`~gateway.errors.ServiceUnavailableError`: the OpenAI error shape with a fixed
message. The database's own message names its URL and may quote a statement, so it
stays in the exception chain (logs), never in the response body.

A value the database refuses (``DataError``: on PostgreSQL a NUL in text, a number out
of its column's range) is a 400 with a fixed message: the routes validate their input
so that this does not happen, and this is the backstop for a field they missed. The
value itself is never quoted back.

A database that hangs instead of failing is a 503 after ``ADMIN_DEADLINE_SECONDS`` (120 s)
too, saying that a change may still land; before, an admin request waited as long as the
hang lasted.

One place for every admin route, whatever service it calls and whatever that service
catches itself: ``APIRouter(route_class=DatabaseErrorsRoute)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from sqlalchemy import exc as sa_exc
from starlette.requests import Request
from starlette.responses import Response

from gateway.errors import BadRequestError, ServiceUnavailableError
from gateway.tenants import DB_UNAVAILABLE
from semantic.errors import StoreUnavailableError

_CAUGHT: tuple[type[Exception], ...] = (*DB_UNAVAILABLE, StoreUnavailableError)

DATABASE_UNAVAILABLE = "the database is unavailable; try again shortly"
STORE_UNAVAILABLE = "the semantic store is unavailable"
REFUSED_VALUE = "a value of the request cannot be stored (a NUL character, a number out of range)"
#: The longest an admin request waits (for a database that hangs instead of failing).
ADMIN_DEADLINE_SECONDS = 120.0
NO_ANSWER = (
    "the database did not answer in time; a change may still be applied when it does:"
    " read it back before sending it again"
)


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
                # A database that hangs fails no call (gateway/db_rest.py): bounded here
                # for every admin route, generously, since reports and deletes of large
                # tenants take long; the thread of a call given up on runs on.
                return await asyncio.wait_for(handler(request), ADMIN_DEADLINE_SECONDS)
            except TimeoutError as exc:
                raise ServiceUnavailableError(NO_ANSWER) from exc
            except _CAUGHT as exc:
                raise unavailable(exc) from exc
            except sa_exc.DataError as exc:
                raise BadRequestError(REFUSED_VALUE, code="invalid_value") from exc

        return handle
