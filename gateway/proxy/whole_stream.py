"""A stream request that an HTTP upstream answered with one JSON body.

Some servers and proxies answer ``"stream": true`` with ``application/json``: an
error object under a 200 (``{"error": {"message": "model overloaded", …}}``), or the
whole answer when they do not stream. Read as SSE, neither has a ``data:`` line, and
the client got the gateway's 502 "the upstream stream ended without a finish reason",
the upstream's own words lost (gateway review, session 38). Now the body is read as
a request that was not streamed reads it (``relay.whole_response``): an error object
is the upstream's error, with its status and object, as before any chunk; a whole
answer becomes the stream the client asked for, its text in one chunk built by the
gateway (as for the built-in engine), then its finish reason and usage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import httpx

from gateway.proxy.relay import choice_text, whole_response
from gateway.proxy.upstream import Delta, Done, Event


def is_whole_json(response: httpx.Response) -> bool:
    """Whether a response to a stream request is one JSON body, not an event stream."""
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/json"


async def whole_as_stream(
    response: httpx.Response,
    kind: str,
    passed: Mapping[str, str],
    max_body: int,
    hide_cached: bool,
) -> AsyncIterator[Event]:
    done = await whole_response(response, kind, passed, max_body, hide_cached)
    body = done.body or {}
    first = next((c for c in body.get("choices", []) if isinstance(c, dict)), {})
    yield Delta(choice_text(first, kind, "message"), headers=passed)
    yield Done(
        finish_reason=done.finish_reason,
        prompt_tokens=done.prompt_tokens,
        completion_tokens=done.completion_tokens,
        cached_tokens=done.cached_tokens,
        usage_known=done.usage_known,
        cached_hidden=done.cached_hidden,
    )
