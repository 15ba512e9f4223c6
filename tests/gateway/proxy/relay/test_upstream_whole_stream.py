"""A stream request answered with one JSON body (gateway/proxy/whole_stream.py): an
error object under a 200 is the upstream's error, its object kept; a whole answer is
the stream the client asked for, and stored. Before, both were the gateway's 502 "the
upstream stream ended without a finish reason", the upstream's words lost."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from tests.gateway.conftest import Gateway, sse_payloads
from tests.gateway.proxy.relay.support import CHAT, Scripted, answer, ask, chunk, sse

OVERLOADED = {"error": {"message": "model overloaded", "type": "server_error", "code": 503}}


def answers_with(up: Scripted, respond: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    async def handler(body: dict[str, Any], request: Request) -> Response:
        seen.append(body)
        return respond()

    up.handler = handler
    return seen


def test_an_error_object_under_a_200_is_the_upstreams_error(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    answers_with(up, lambda: JSONResponse(OVERLOADED))
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("Is it overloaded?", stream=True))
    assert r.status_code == 502  # a code that is no 4xx: the gateway's status for it
    assert r.json() == OVERLOADED  # the upstream's object, as a whole request gets it


def test_a_whole_answer_becomes_the_stream_asked_for_and_is_stored(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    seen = answers_with(up, lambda: JSONResponse(answer("Paris is the capital.")))
    question = ask("Which city is the capital of France?", stream=True)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=question)
        again = http.post(CHAT, json=question)
    assert seen[0]["stream"] is True and len(seen) == 1  # the second one was a hit
    assert r.status_code == 200 and r.text.endswith("data: [DONE]\n\n"), r.text
    events = sse_payloads(r.text)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert text == "Paris is the capital."
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "stop"
    assert again.headers["x-cachegate-cache"] == "semantic-hit"
    assert "Paris is the capital." in again.text


@pytest.mark.parametrize("media", ["text/event-stream", "text/plain"])
def test_an_event_stream_is_still_read_as_one(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], media: str
) -> None:
    # control: only application/json is a whole body; SSE under another type is SSE
    def respond() -> Response:
        r = sse(chunk({"content": "Rome."}, "stop"), "data: [DONE]\n\n")
        r.headers["content-type"] = media
        return r

    answers_with(up, respond)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"Capital of Italy ({media})?", stream=True))
    assert r.status_code == 200 and "Rome." in r.text
