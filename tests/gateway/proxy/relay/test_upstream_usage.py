"""Usage counts an upstream mangles (negative, text, not a map, past any real count):
the answer reaches the client as the upstream wrote it, is stored, and its hits work;
the counts that reach metrics and statistics are 0 (gateway/proxy/upstream.py
``usage_counts``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from tests.gateway.conftest import Gateway
from tests.gateway.proxy.relay.support import CHAT, Scripted, answer, ask, chunk, sse

HUGE = 10**400  # valid JSON, and no float holds it


@pytest.mark.parametrize(
    "odd",
    [
        {"prompt_tokens": -5, "completion_tokens": 2},
        {"prompt_tokens": "many"},
        ["not", "a", "map"],
        # a float conversion failed the miss after it stored the answer, then every hit
        {"prompt_tokens": 5, "completion_tokens": HUGE},
        {"prompt_tokens": HUGE, "completion_tokens": 2},
        {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": HUGE}},
        # past 64 bits: the statistics batch it was in was lost
        {"prompt_tokens": 2**63, "completion_tokens": 2},
    ],
    ids=["negative", "text", "list", "huge-completion", "huge-prompt", "huge-cached", "2**63"],
)
def test_mangled_usage_counts_never_break_the_answer_or_its_hits(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], odd: Any
) -> None:
    # A Prometheus counter refuses to go down, and the stored usage is read on each hit.
    async def handler(body: dict[str, Any], request: Request) -> Response:
        return JSONResponse(answer("Paris.") | {"usage": odd})

    up.handler = handler
    with gw.http(tenant[1]) as http:
        first = http.post(CHAT, json=ask("What is the capital of France?"))
        again = http.post(CHAT, json=ask("What is the capital of France?"))
    assert first.status_code == 200, first.text
    assert first.json()["usage"] == odd  # relayed as the upstream wrote it
    assert first.headers["x-cachegate-backfill"] == "stored"
    assert again.status_code == 200, again.text
    assert again.headers["x-cachegate-cache"] == "semantic-hit"
    assert again.json()["choices"][0]["message"]["content"] == "Paris."


def test_a_huge_count_at_a_streams_end_never_cuts_the_stream(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    usage = {"prompt_tokens": HUGE, "completion_tokens": 2, "total_tokens": HUGE}
    stop = chunk({}, "stop")[: -len("}\n\n")] + ', "usage": ' + json.dumps(usage) + "}\n\n"

    async def handler(body: dict[str, Any], request: Request) -> Response:
        return sse(chunk({"role": "assistant", "content": "Paris."}), stop, "data: [DONE]\n\n")

    up.handler = handler
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("Capital of France, streamed?", stream=True))
        again = http.post(CHAT, json=ask("Capital of France, streamed?", stream=True))
    assert r.status_code == 200 and r.text.endswith("data: [DONE]\n\n"), r.text
    assert again.headers["x-cachegate-cache"] == "semantic-hit"
    assert again.text.endswith("data: [DONE]\n\n") and "Paris." in again.text


def test_a_null_usage_on_every_chunk_reaches_the_client_byte_for_byte(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    # SGLang writes `"usage": null` on every chunk whether or not usage was asked for;
    # the gateway asked (to store the answer), the client did not. Only a usage the
    # gateway's question brought goes: before, each chunk lost its null and was
    # re-encoded (\u00e7 for ç, no spaces; a review, session 43).
    head = '{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "relay-model", '
    lines = [
        head + '"choices": [{"index": 0, "delta": {"content": "ça va"}, "finish_reason": null}], '
        '"usage": null}',
        head + '"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": null}',
    ]
    counted = head + '"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}'

    async def handler(body: dict[str, Any], request: Request) -> Response:
        assert body["stream_options"] == {"include_usage": True}  # the gateway's question
        return sse(*(f"data: {line}\n\n" for line in [*lines, counted]), "data: [DONE]\n\n")

    up.handler = handler
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("null usage, please", stream=True))
    assert r.status_code == 200, r.text
    sent = [e[len("data: ") :] for e in r.text.split("\n\n") if e.startswith("data: ")]
    assert sent == [*lines, "[DONE]"]  # the counted chunk was the gateway's: not passed
