"""``/v1/chat/completions/`` is ``/v1/chat/completions``: the OpenAI routes answer with
or without a trailing slash.

Starlette's router answers a path that differs from a route only by its trailing slash
with a 307 to the other spelling, built from the request's ``Host`` and scheme as the
gateway sees them: behind a TLS-terminating balancer that is an ``http://`` address an
``https`` client should not follow (and a client that does not follow redirects fails),
and ``/v1/models/`` was read as the model ``""`` (a 404 ``model_not_found``). This
middleware strips the trailing slashes of a ``/v1/`` path before routing, so those
requests are served, and logged and traced, under the route's own path.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

PREFIX = "/v1/"


class StripTrailingSlash:
    """ASGI middleware: ``/v1/...//`` → ``/v1/...`` (``path`` and ``raw_path``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path.startswith(PREFIX) and path.endswith("/"):
            stripped = path.rstrip("/")
            if len(stripped) >= len(PREFIX):  # "/v1/" itself is left alone
                scope = dict(scope, path=stripped)
                raw = scope.get("raw_path")
                if isinstance(raw, bytes | bytearray):
                    scope["raw_path"] = bytes(raw).rstrip(b"/")
        await self.app(scope, receive, send)
