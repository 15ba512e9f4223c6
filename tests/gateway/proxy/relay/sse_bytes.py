"""SSE as an OpenAI-compatible upstream writes it, byte for byte (raw UTF-8 JSON, the
way vLLM and our engine send it), for the relay's SSE tests."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from tests.gateway.proxy.relay.support import MODEL, Scripted


def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One chunk as vLLM writes it: raw UTF-8, no escapes beyond what JSON requires."""
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    payload = json.dumps(body | {"choices": [choice]}, ensure_ascii=False, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


ROLE = event({"role": "assistant", "content": ""})
STOP = event({}, "stop")
DONE = b"data: [DONE]\n\n"
_COUNTS = {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}
USAGE = b"data: " + json.dumps({"id": "c1", "choices": [], "usage": _COUNTS}).encode() + b"\n\n"


def sse(*parts: bytes) -> Response:
    return Response(b"".join(parts), media_type="text/event-stream")


def answers(up: Scripted, *parts: bytes) -> None:
    async def handler(body: dict[str, Any], request: Request) -> Response:
        return sse(*parts)

    up.handler = handler
