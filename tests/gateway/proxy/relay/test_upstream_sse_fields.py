"""An upstream's SSE ``event:``, ``id:`` and ``retry:`` lines reach the client with the
event they belong to (gateway/proxy/upstream_read.py): EventSource clients keep ``id``
as their Last-Event-ID and route on ``event``, and a ``retry:`` sets their reconnection
delay. Before session 39 the gateway dropped them. Other field names (which the SSE
spec has clients ignore) and lines that are not short printable text are not passed.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from tests.gateway.conftest import Gateway
from tests.gateway.proxy.relay.support import CHAT, MODEL, Scripted, ask


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "model": MODEL, "choices": [choice]}
    return json.dumps(body, separators=(",", ":")).encode()


def contents(text: str) -> str:
    """The streamed answer, from the ``data:`` lines of every event."""
    payloads = [
        json.loads(line.removeprefix("data: "))
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    return "".join(c["choices"][0]["delta"].get("content", "") for c in payloads)


def streams(up: Scripted, body: bytes) -> None:
    async def handler(_body: dict[str, Any], _request: Request) -> Response:
        return Response(body, media_type="text/event-stream")

    up.handler = handler


def test_event_id_and_retry_lines_travel_with_their_chunk(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    body = (
        b"retry: 3000\n\n"
        + b"id: 1\nevent: message\ndata: " + chunk({"role": "assistant", "content": "Hi"}) + b"\n\n"
        + b"id: 2\ndata: " + chunk({"content": " there"}, "stop") + b"\n\n"
        + b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,'
        + b'"total_tokens":7}}\n\n'
        + b"data: [DONE]\n\n"
    )  # fmt: skip
    streams(up, body)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("Which SSE fields reach the client?", stream=True))
    assert r.status_code == 200, r.text
    assert r.text.startswith("retry: 3000\n\n")
    assert "id: 1\nevent: message\ndata: " in r.text
    assert "\n\nid: 2\ndata: " in r.text
    assert contents(r.text) == "Hi there"
    assert r.text.endswith("data: [DONE]\n\n")
    assert "usage" not in r.text  # the gateway's own include_usage chunk, taken out


def test_unknown_fields_and_unprintable_values_are_not_passed(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    body = (
        b"foo: bar\nid: 1\x07\nevent: " + b"x" * 300 + b"\nevent: ok\ndata: "
        + chunk({"role": "assistant", "content": "Hi"}, "stop") + b"\n\n"
        + b"data: [DONE]\n\n"
    )  # fmt: skip
    streams(up, body)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("Which SSE fields are dropped?", stream=True))
    assert r.status_code == 200, r.text
    assert "foo" not in r.text and "id:" not in r.text and "xxx" not in r.text
    assert "event: ok\ndata: " in r.text  # the control: a well-formed field is passed


def test_an_error_event_mid_stream_keeps_its_fields(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    """An error event after the first chunk went out as its data line alone: an
    EventSource client listening for ``error`` events never got it (a review)."""
    error = {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}}
    body = (
        b"data: " + chunk({"role": "assistant", "content": "Half"}) + b"\n\n"
        + b"event: error\nid: 9\ndata: " + json.dumps(error).encode() + b"\n\n"
    )  # fmt: skip
    streams(up, body)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("Does a failed stream keep its event name?", stream=True))
    assert r.status_code == 200, r.text
    assert "event: error\nid: 9\ndata: " + json.dumps(error) + "\n\n" in r.text
    assert r.text.endswith("data: [DONE]\n\n")
