"""Cancel a completion request's work when its client leaves before the answer starts.

uvicorn and Starlette notice a client that disconnects only while a streaming body
is being sent (``StreamingResponse`` listens for ``http.disconnect`` then, and
``EventStream`` closes its generator, which aborts the upstream request). Before
that, the route is awaiting the semantic lookup, the engine's first token (a
request queued in the engine) or a whole non-streamed answer, and nothing listens:
an abandoned request kept its engine slot, its KV blocks and its place in the
engine's queue until it ran to ``max_tokens``, and over HTTP the gateway kept the
upstream connection, so the engine server's own watcher never fired.

:func:`unless_disconnected` runs the route's work in a task and waits on the ASGI
``receive()`` beside it, as vLLM's ``with_cancellation`` does. Once the request body
has been read, the only message ``receive()`` can bring is ``http.disconnect``; the
work is then cancelled, so the ``CancelledError`` reaches the upstream generators,
whose ``finally`` blocks abort the engine request or close the upstream response,
and the route answers 499 to nobody (the access line reads it, ``request_log.py``).
The listening ends when the work returns its response: what follows (a streamed
body) is Starlette's to watch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from fastapi.responses import Response
from starlette.types import Receive

from gateway.request_log import CLIENT_CLOSED_REQUEST


async def unless_disconnected(receive: Receive, work: Coroutine[Any, Any, Response]) -> Response:
    """``await work``, cancelled if the client disconnects first (then a 499 response).

    Call it only once the request body has been read in full: a ``receive()`` made
    earlier would take the body's own messages away from the route.
    """
    handler = asyncio.ensure_future(work)  # a copy of this context: the access line's too
    listener = asyncio.ensure_future(_disconnected(receive))
    try:
        done, _ = await asyncio.wait((handler, listener), return_when=asyncio.FIRST_COMPLETED)
        if handler not in done and listener.exception() is None:
            handler.cancel()  # the client left
        await asyncio.wait((handler,))  # a listener that failed leaves the work be
    finally:
        # Never left listening: a streamed response's own watcher reads receive() next.
        listener.cancel()
        handler.cancel()  # nothing once it is done; if this task was cancelled, it goes too
        # Its clean-up (the engine request's abort, the upstream response's close) is
        # over before this returns or raises.
        await asyncio.wait((handler, listener))
    if handler.cancelled():
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    # A response made just as the client left is still returned: a streamed one holds
    # the upstream request, which only its EventStream closes.
    return handler.result()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass  # a body message cannot come after the body ended; skipped if one does
