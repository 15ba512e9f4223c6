"""A stream request answered with one JSON body is forwarded as the stream the upstream
would have sent (gateway/proxy/whole_stream.py): every choice, its tool calls, its
``reasoning_content``, the body's ``model`` and ``system_fingerprint``; the usage
chunk only when the client asked for it; and what it stores keeps what a hit must
replay. Before (a review, session 40) only choice 0's text went out, the client's
requested model stood in for the upstream's, and the reduced answer was stored."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from tests.gateway.conftest import Gateway, sse_payloads
from tests.gateway.proxy.relay.support import CHAT, MODEL, Scripted, answer, ask, entries

SERVED_MODEL = MODEL + "-2024-08-06"


def whole(body: dict[str, Any]) -> Any:
    async def handler(_body: dict[str, Any], _request: Request) -> Response:
        return JSONResponse(body)

    return handler


def test_tool_calls_and_every_choice_reach_the_client(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    call = {"id": "call_1", "type": "function",
            "function": {"name": "weather", "arguments": json.dumps({"city": "Oslo"})}}  # fmt: skip
    body = answer("", finish_reason="tool_calls")
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [call]}
    second = {"index": 1, "message": {"role": "assistant", "content": "Second."},
              "finish_reason": "stop", "logprobs": None}  # fmt: skip
    body["choices"].append(second)
    up.handler = whole(body)
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {}}}]
    before = entries(gw, tenant[0])
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("Weather in Oslo?", stream=True, tools=tools, n=2))
    assert r.status_code == 200, r.text
    events = sse_payloads(r.text)
    by_index = {c["index"]: c for e in events for c in e["choices"]}
    assert by_index[0]["delta"]["tool_calls"] == [{"index": 0} | call]
    assert by_index[0]["finish_reason"] == "tool_calls"
    assert by_index[1]["delta"]["content"] == "Second."
    time.sleep(0.3)
    assert entries(gw, tenant[0]) == before  # tool calls, two choices: never stored


def test_reasoning_model_and_fingerprint_are_kept_and_stored(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    body = answer("Oslo is the capital.")
    body |= {"model": SERVED_MODEL, "system_fingerprint": "fp_9"}
    body["choices"][0]["message"]["reasoning_content"] = "Norway's capital is Oslo."
    up.handler = whole(body)
    question = ask("Which city is the capital of Norway?", stream=True)
    asked = question | {"stream_options": {"include_usage": True}}
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=asked)
        plain = http.post(CHAT, json=ask("What is the capital city of Norway?", stream=True))
    events = sse_payloads(r.text)
    first = events[0]
    assert first["model"] == SERVED_MODEL and first["system_fingerprint"] == "fp_9"
    assert first["id"] == body["id"] and first["object"] == "chat.completion.chunk"
    delta = first["choices"][0]["delta"]
    assert delta["reasoning_content"] == "Norway's capital is Oslo."
    assert delta["content"] == "Oslo is the capital."
    assert events[-1]["choices"] == [] and events[-1]["usage"]["total_tokens"] == 7
    # the hit replays what was stored: the reasoning and the upstream's model
    assert plain.headers["x-cachegate-cache"] == "semantic-hit", plain.headers
    hit = sse_payloads(plain.text)
    assert hit[0]["model"] == SERVED_MODEL
    replayed = "".join(e["choices"][0]["delta"].get("reasoning_content") or "" for e in hit
                       if e["choices"])  # fmt: skip
    assert replayed == "Norway's capital is Oslo."
    assert all("usage" not in e or e["usage"] is None for e in hit)  # not asked for


def test_no_usage_chunk_unless_the_client_asked(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    up.handler = whole(answer("Bergen is rainy."))
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("Is Bergen a rainy place to live?", stream=True))
    events = sse_payloads(r.text)
    assert all(e["choices"] for e in events)  # the gateway's own usage request stays its own
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events) == (
        "Bergen is rainy."
    )
