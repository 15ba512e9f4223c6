"""Fields of other servers in a streamed answer (gateway/proxy/passthrough.py).

A streamed miss is stored as the assembly puts it back together. It kept only the
fields it knew, so a hit after a streamed miss lacked SGLang's ``matched_stop`` and a
delta's other text that a hit after a body had (a review, session 50). Now a choice's
other fields are kept (the last value not null), a delta's other strings concatenated,
and a delta field that cannot be put back together (OpenRouter's ``reasoning_details``,
a list of fragments) keeps the answer from being stored: a hit replays all of an
answer or none. Each beside its control.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.proxy.passthrough import UNREBUILT, StreamAssembly
from tests.gateway.conftest import Gateway
from tests.gateway.proxy.relay.support import CHAT, MODEL, Scripted

USE = {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}


def assembled(*choices: dict[str, Any]) -> dict[str, Any]:
    assembly = StreamAssembly("chat")
    for choice in choices:
        assembly.add({"id": "c", "choices": [{"index": 0} | choice]})
    return assembly.body(dict(USE))


def test_a_choices_other_fields_keep_their_last_value() -> None:
    body = assembled(
        {"delta": {"role": "assistant", "content": "Hi"}, "matched_stop": None},
        {"delta": {"content": " there"}, "matched_stop": None},
        {"delta": {}, "finish_reason": "stop", "matched_stop": 2},
        {"delta": {}, "matched_stop": None},  # a later null never undoes a set one
    )
    assert "error" not in body
    choice = body["choices"][0]
    assert choice["matched_stop"] == 2 and choice["message"]["content"] == "Hi there"
    only_null = assembled({"delta": {"content": "x"}, "finish_reason": "stop", "seed": None})
    assert only_null["choices"][0]["seed"] is None  # named null: null, as a body says
    plain = assembled({"delta": {"content": "x"}, "finish_reason": "stop"})
    assert set(plain["choices"][0]) == {"index", "finish_reason", "logprobs", "message"}


def test_a_deltas_other_text_is_concatenated_and_other_values_are_not_stored() -> None:
    body = assembled(
        {"delta": {"content": "A", "thinking": "Let me", "provider_note": None}},
        {"delta": {"content": "B", "thinking": " see."}, "finish_reason": "stop"},
    )
    assert "error" not in body
    message = body["choices"][0]["message"]
    assert message == {
        "role": "assistant", "content": "AB", "thinking": "Let me see.", "provider_note": None
    }  # fmt: skip
    fragments = assembled(
        {"delta": {"content": "A", "reasoning_details": [{"type": "reasoning.text", "text": "x"}]}},
        {"delta": {"content": "B"}, "finish_reason": "stop"},
    )
    assert fragments["error"] == UNREBUILT  # not stored: cacheability refuses an error


def test_empty_and_per_token_delta_fields_do_not_stop_the_store() -> None:
    """OpenRouter sends ``reasoning_details: []`` on every chunk of every model, Together
    a ``token_id`` in each delta (the diff review, session 50: such streams were never
    stored): kept empty, and dropped, as a body would have them."""
    openrouter = assembled(
        {"delta": {"role": "assistant", "content": "Sa", "reasoning_details": []}},
        {"delta": {"content": "lut", "reasoning_details": []}, "native_finish_reason": "stop"},
        {"delta": {"content": "", "reasoning_details": []}, "finish_reason": "stop"},
    )
    assert "error" not in openrouter
    choice = openrouter["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Salut", "reasoning_details": []}
    assert choice["native_finish_reason"] == "stop"
    together = assembled(
        {"delta": {"content": "Hi", "token_id": 30}},
        {"delta": {"content": " there", "token_id": 31}, "finish_reason": "stop"},
    )
    assert "error" not in together
    assert together["choices"][0]["message"] == {"role": "assistant", "content": "Hi there"}


def upstream(up: Scripted, calls: list[dict[str, Any]], details: bool) -> None:
    """An SGLang-like upstream: ``matched_stop`` on its choices and ``thinking`` text;
    with ``details``, OpenRouter's ``reasoning_details`` too."""
    extra = [{"type": "reasoning.text", "text": "thought"}] if details else None

    async def handler(body: dict[str, Any], request: Request) -> Response:
        calls.append(body)
        message: dict[str, Any] = {"role": "assistant", "content": "Paris.", "thinking": "Easy."}
        if extra:
            message["reasoning_details"] = extra
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "logprobs": None,
                      "finish_reason": "stop", "matched_stop": 2}  # fmt: skip
            return JSONResponse({"id": "up", "object": "chat.completion", "created": 1,
                                 "model": MODEL, "choices": [choice], "usage": USE})  # fmt: skip
        deltas = [
            {"role": "assistant", "content": "Par", "thinking": "Ea"}
            | ({"reasoning_details": extra} if extra else {}),
            {"content": "is.", "thinking": "sy."},
        ]
        head = {"id": "up", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
        events = [
            head | {"choices": [{"index": 0, "delta": d, "logprobs": None,
                                 "finish_reason": None, "matched_stop": None}]}
            for d in deltas
        ]  # fmt: skip
        last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
        events.append(head | {"choices": [last | {"matched_stop": 2}]})
        events.append(head | {"choices": [], "usage": USE})
        raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return Response(raw, media_type="text/event-stream")

    up.handler = handler


def ask(http: httpx.Client, question: str, stream: bool) -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": question}]}
    got = http.post(CHAT, json=body | {"stream": stream})
    assert got.status_code == 200, got.text
    return got


def hit(http: httpx.Client, question: str) -> dict[str, Any] | None:
    """The hit's choice once the backfill (after a stream's [DONE]) has stored it."""
    for _ in range(30):
        got = ask(http, question, False)
        if got.headers["x-cachegate-cache"] == "semantic-hit":
            return dict(got.json()["choices"][0])
        time.sleep(0.1)
    return None


@pytest.mark.parametrize("first", ["body", "stream"])
def test_a_hit_replays_the_same_fields_whether_its_miss_streamed(
    gw: Gateway, up: Scripted, first: str
) -> None:
    calls: list[dict[str, Any]] = []
    upstream(up, calls, details=False)
    question = f"What is the capital of France? ({first} first)"
    with gw.http(gw.tenant(f"fields-{first}")[1]) as http:
        ask(http, question, first == "stream")
        choice = hit(http, question)
    assert choice is not None and len(calls) == 1
    assert choice["matched_stop"] == 2
    assert choice["message"] == {"role": "assistant", "content": "Paris.", "thinking": "Easy."}


def test_a_stream_with_fragments_is_not_stored_a_body_with_them_is(
    gw: Gateway, up: Scripted
) -> None:
    calls: list[dict[str, Any]] = []
    upstream(up, calls, details=True)
    with gw.http(gw.tenant("fields-details")[1]) as http:
        ask(http, "What is the capital of Italy?", True)
        time.sleep(1.0)  # a stored answer would be stored by now
        again = ask(http, "What is the capital of Italy?", False)
        assert again.headers["x-cachegate-cache"] == "miss"  # the stream was not stored
        # the control: the body it answered that time was stored whole, fragments too
        choice = hit(http, "What is the capital of Italy?")
    assert choice is not None
    assert choice["message"]["reasoning_details"] == [{"type": "reasoning.text", "text": "thought"}]
