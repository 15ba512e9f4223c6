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
from typing import Any

import httpx

from gateway.proxy.relay import choice_text, whole_response
from gateway.proxy.upstream import Delta, Done, Event


def is_whole_json(response: httpx.Response) -> bool:
    """Whether a response to a stream request is one JSON body, not an event stream."""
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/json"


def asks_for_usage(body: Mapping[str, Any], added_usage: bool) -> bool:
    """Whether the client asked for the stream's usage chunk itself (``body`` as sent
    upstream; ``added_usage``: the gateway asked for it, for itself)."""
    options = body.get("stream_options")
    return not added_usage and isinstance(options, dict) and options.get("include_usage") is True


async def whole_as_stream(
    response: httpx.Response,
    kind: str,
    passed: Mapping[str, str],
    max_body: int,
    hide_cached: bool,
    usage_chunk: bool = False,
) -> AsyncIterator[Event]:
    """The body as the stream the upstream would have sent: one chunk a choice (its
    whole message as the delta, its logprobs and finish reason) with the body's own
    ``id``, ``created``, ``model`` and ``system_fingerprint``, then the usage chunk when
    the client asked for one (``usage_chunk``). Forwarded and put back together as any
    upstream chunk is (``gateway/proxy/passthrough.py``): tool calls, every choice,
    ``reasoning_content`` and a refusal reach the client, and what the cacheability
    rules must see to refuse the answer is there (a review, session 40: only choice
    0's text went out, and was stored)."""
    done = await whole_response(response, kind, passed, max_body, hide_cached)
    body = done.body or {}
    head = {k: body[k] for k in _HEAD if k in body}
    head["object"] = "chat.completion.chunk" if kind == "chat" else "text_completion"
    # The body's other fields (Azure's prompt_filter_results, a vendor's own) go on the
    # first chunk, as a stream carries them, never dropped.
    first = head | {k: v for k, v in body.items() if k not in _HEAD and k not in _PER_CHUNK}
    headers: Mapping[str, str] = passed
    choices = [c for c in body.get("choices") or [] if isinstance(c, dict)]
    if not choices:  # none (a filtered prompt): one chunk without, as the upstream sent
        yield Delta("", raw=first | {"choices": []}, headers=headers)
        first, headers = head, {}
    for choice in choices:
        part = _choice_chunk(choice, kind)
        text = choice_text(part, kind) if part.get("index", 0) == 0 else ""
        yield Delta(text, raw=first | {"choices": [part]}, headers=headers)
        first, headers = head, {}
    usage = body.get("usage")
    if usage_chunk and isinstance(usage, dict):
        yield Delta("", raw=head | {"choices": [], "usage": usage}, headers=headers)
    yield Done(
        finish_reason=done.finish_reason,
        prompt_tokens=done.prompt_tokens,
        completion_tokens=done.completion_tokens,
        cached_tokens=done.cached_tokens,
        usage_known=done.usage_known,
        extra={"usage": usage} if isinstance(usage, dict) else {},
        cached_hidden=done.cached_hidden,
    )


_HEAD = ("id", "created", "model", "system_fingerprint", "service_tier")
_PER_CHUNK = ("object", "choices", "usage")  # what each chunk has of its own


def _choice_chunk(choice: dict[str, Any], kind: str) -> dict[str, Any]:
    """One choice of a whole answer as a stream's choice: ``message`` becomes ``delta``
    (each tool call with the ``index`` a streamed one carries)."""
    out = {k: v for k, v in choice.items() if k != "message"}
    if kind == "chat":
        message = choice.get("message")
        delta = dict(message) if isinstance(message, dict) else {}
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [
                {"index": i} | c if isinstance(c, dict) and "index" not in c else c
                for i, c in enumerate(calls)
            ]
        out["delta"] = delta
    return out
