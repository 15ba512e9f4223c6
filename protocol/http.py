"""HTTP plumbing shared by the engine server and the gateway: bounded JSON body reading,
SSE events, and an SSE response that always closes its generator."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import anyio
from fastapi import Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from protocol.errors import ApiError

__all__ = ["ApiError", "EventStream", "read_json", "sse"]


class EventStream(StreamingResponse):
    """SSE response that always closes its generator (and so aborts the engine request).

    Starlette cancels the body iterator when the client disconnects, but an iterator
    abandoned while suspended at a ``yield`` is only closed by the garbage
    collector; this closes it deterministically, shielded from the cancellation.
    """

    def __init__(
        self,
        events: AsyncGenerator[str, None],
        request_id: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        headers = {
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            "X-Request-Id": request_id,
        } | (headers or {})
        super().__init__(events, media_type="text/event-stream", headers=headers)
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self._events.aclose()


def reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'), ensure_ascii=False)}\n\n"


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object, or an ApiError (empty, not JSON, too large, not an object)."""
    too_large = ApiError(
        413,
        f"the request body is larger than the limit of {limit} bytes",
        code="request_too_large",
    )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > 8 * limit:
        raise too_large  # not worth draining: the connection will be closed
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > 8 * limit:
            raise too_large
        if size <= limit:
            chunks.append(chunk)
    if size > limit:  # drained, so the client can read the answer
        raise too_large
    raw = b"".join(chunks)
    if not raw.strip():
        raise ApiError(400, "the request body is empty; expected a JSON object")
    try:
        body = json.loads(raw, parse_constant=reject_constant)
    except (ValueError, RecursionError) as e:
        raise ApiError(400, f"the request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body
