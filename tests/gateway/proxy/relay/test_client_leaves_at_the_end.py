"""A client that leaves while the last events of a streamed miss are being sent.

The answer is whole from the upstream's finish on: it has cost all it will, so it is
charged, counted and stored even when the client goes away meanwhile (a slow reader
whose socket buffer is full blocks the send of ``[DONE]``, and the disconnect closes
the stream there). Before session 44 the finish was begun only after that send, so
such a client was never charged (its tenant's ``rate_limit_tpm`` skipped), nor
counted, and the answer was not stored (a review). Driven through the gateway's ASGI
app directly, so the send can block at exactly that event; a module of its own, so
its gateway serves no other test's request.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from tests.gateway.conftest import Gateway
from tests.gateway.proxy.relay.support import CHAT, DONE, Scripted, ask, chunk, entries

USAGE = {"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160}


def scope(key: str) -> dict[str, Any]:
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1", "method": "POST", "scheme": "http", "path": CHAT,
        "raw_path": CHAT.encode(), "query_string": b"", "root_path": "",
        "headers": headers, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2),
    }  # fmt: skip


async def leave_at(gw: Gateway, key: str, body: bytes, marker: bytes) -> bytes:
    """Send the request; the client leaves while the event holding ``marker`` is sent
    (that send never completes). Returns what the client had received."""
    gone = asyncio.Event()
    received: list[bytes] = []
    asked = False

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        data = message.get("body", b"")
        if marker in data:  # the socket's buffer is full: this send waits ...
            gone.set()  # ... and the client goes away meanwhile
            await asyncio.Event().wait()
        received.append(data)

    await asyncio.wait_for(gw.app(scope(key), receive, send), 10)
    # The server's loop lives on after a request; this one must too, for what it began.
    begun = asyncio.all_tasks() - {asyncio.current_task()}
    if begun:
        await asyncio.wait(begun, timeout=10)
    return b"".join(received)


def test_a_client_leaving_during_done_is_still_charged_counted_and_stored(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    tenant_id, key = tenant
    events = (
        chunk({"role": "assistant", "content": ""}), chunk({"content": "On the support page."}),
        chunk({}, "stop"),
        "data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 1,
                               "model": "relay-model", "choices": [], "usage": USAGE}) + "\n\n",
        DONE,
    )  # fmt: skip

    async def handler(_body: dict[str, Any], _request: Request) -> Response:
        return Response("".join(events), media_type="text/event-stream")

    up.handler = handler
    charged: list[int] = []
    gw.state.charge_tokens = lambda _ctx, tokens: charged.append(tokens)
    question = ask("Where can I find the user manual?", stream=True)
    got = asyncio.run(leave_at(gw, key, json.dumps(question).encode(), b"[DONE]"))
    assert b'"finish_reason": "stop"' in got and b"[DONE]" not in got
    deadline = time.monotonic() + 5
    while entries(gw, tenant_id) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert entries(gw, tenant_id) == 1  # stored
    assert charged == [160]  # the upstream's count, charged whole
