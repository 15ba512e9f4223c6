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
from tests.gateway.proxy.relay.support import CHAT, Scripted, answer, ask, chunk, entries, sse

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


FILTERED = {"prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]}


def test_a_whole_answer_without_choices_is_passed_on_not_invented(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    """Azure answers a filtered prompt with no choices and the filter's results. The
    client got an empty assistant choice the upstream never sent, finished "unknown"
    (no OpenAI value), under the gateway's id, the results dropped (a review, session
    45). Now one chunk as the upstream's body says it, then [DONE]; nothing stored."""
    body = answer("unused") | {"id": "chatcmpl-up42", "choices": []} | FILTERED
    answers_with(up, lambda: JSONResponse(body))
    stored = entries(gw, tenant[0])
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("A question the filter stops", stream=True))
    assert r.status_code == 200 and r.text.endswith("data: [DONE]\n\n"), r.text
    events = sse_payloads(r.text)
    assert len(events) == 1 and events[0]["choices"] == [], events
    assert events[0]["id"] == "chatcmpl-up42"
    assert events[0]["prompt_filter_results"] == FILTERED["prompt_filter_results"]
    assert entries(gw, tenant[0]) == stored


def test_a_whole_answers_own_fields_go_on_its_first_chunk(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    body = answer("Lima.") | FILTERED  # the control: with a choice
    answers_with(up, lambda: JSONResponse(body))
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("Capital of Peru?", stream=True))
    events = sse_payloads(r.text)
    assert events[0]["prompt_filter_results"] == FILTERED["prompt_filter_results"]
    assert events[0]["choices"][0]["delta"]["content"] == "Lima."
    assert all("prompt_filter_results" not in e for e in events[1:])
