"""A semantic hit has the shape of the upstream answer it replays (gateway/proxy/routes.py
``_semantic_hit``, protocol/responses.py ``replayed_body``).

Through the real gateway in front of a scripted upstream: a miss, then the same request
again. The hit equals the miss's body except its own ``id`` and ``created`` and the
cached-token accounting of its usage (every prompt token cached); the model the upstream
answered with, ``system_fingerprint``, the message's ``refusal`` and ``annotations``,
the usage details all come back; ``service_tier`` is the client's own, null when it
named none (``gateway/proxy/hit_tier.py``, tested in ``test_hit_request_fields.py``).
Streamed hits carry the upstream's model and fingerprint on every chunk and
``logprobs: null`` on every choice. A stored answer whose usage or model is not the
shape OpenAI gives is still served, as before.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from protocol.responses import answer_shape, replayed_body, replayed_usage, usage
from tests.gateway.conftest import Gateway, sse_payloads
from tests.gateway.proxy.relay.support import CHAT, MODEL, Scripted

COMPLETIONS = "/v1/completions"
DATED = "relay-model-2024-08-06"  # the model the upstream says answered the alias
FINGERPRINT = "fp_abc123"

USAGE = {
    "prompt_tokens": 12,
    "completion_tokens": 3,
    "total_tokens": 15,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {
        "reasoning_tokens": 0,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    },
}


def chat_answer(text: str) -> dict[str, Any]:
    """An answer as the OpenAI API gives it, with vLLM's extra fields besides."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text,
        "refusal": None,
        "annotations": [],
        "audio": None,
        "tool_calls": [],
        "reasoning_content": None,
    }
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion",
        "created": 1700000000,
        "model": DATED,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ],
        "usage": copy.deepcopy(USAGE),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
        "prompt_logprobs": None,
        "kv_transfer_params": None,
    }


def completion_answer(text: str) -> dict[str, Any]:
    return {
        "id": "cmpl-up",
        "object": "text_completion",
        "created": 1700000000,
        "model": DATED,
        "system_fingerprint": FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ],
        "usage": copy.deepcopy(USAGE),
    }


def chunks(kind: str, text: str, include_usage: bool) -> Response:
    """The answer streamed the way the OpenAI API streams it."""
    obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
    head = {"id": "up-1", "object": obj, "created": 1700000000, "model": DATED,
            "service_tier": "default", "system_fingerprint": FINGERPRINT}  # fmt: skip

    def choice(piece: str | None, finish: str | None) -> dict[str, Any]:
        if kind == "chat":
            delta = {} if piece is None else {"content": piece}
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": piece or "", "logprobs": None, "finish_reason": finish}

    events: list[dict[str, Any]] = []
    if kind == "chat":
        first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                 "finish_reason": None}  # fmt: skip
        events.append(head | {"choices": [first]})
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    events += [head | {"choices": [choice(piece, None)]} for piece in pieces]
    events.append(head | {"choices": [choice(None, "stop")]})
    if include_usage:
        events.append(head | {"choices": [], "usage": copy.deepcopy(USAGE)})
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return Response(body, media_type="text/event-stream")


@pytest.fixture
def key(gw: Gateway) -> str:
    return gw.tenant("parity")[1]


def scripted(up: Scripted, stored: dict[str, Any] | None = None) -> None:
    """Answers: ``stored`` when given, else the OpenAI-shaped answer to the question."""

    async def handler(body: dict[str, Any], request: Request) -> Response:
        kind = "chat" if "messages" in body else "completion"
        question = body["messages"][-1]["content"] if kind == "chat" else body["prompt"]
        text = f"An answer to: {question}"
        if body.get("stream"):
            options = body.get("stream_options") or {}
            return chunks(kind, text, options.get("include_usage") is True)
        if stored is not None:
            return JSONResponse(stored)
        return JSONResponse(chat_answer(text) if kind == "chat" else completion_answer(text))

    up.handler = handler


def request(kind: str, question: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    if kind == "chat":
        return CHAT, {"model": MODEL, "messages": [{"role": "user", "content": question}]} | extra
    return COMPLETIONS, {"model": MODEL, "prompt": question} | extra


def as_hit(usage_: dict[str, Any]) -> dict[str, Any]:
    """The miss's usage as a hit reports it: every prompt token cached."""
    out = copy.deepcopy(usage_)
    out["prompt_tokens_details"]["cached_tokens"] = out["prompt_tokens"]
    return out


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_a_hit_equals_the_answer_it_replays(gw: Gateway, up: Scripted, key: str, kind: str) -> None:
    scripted(up)
    path, body = request(kind, f"Why is the sky blue? ({kind})")
    with gw.http(key) as http:
        miss = http.post(path, json=body)
        hit = http.post(path, json=body)
    assert miss.status_code == 200 and hit.status_code == 200, (miss.text, hit.text)
    assert miss.headers["x-cachegate-backfill"] == "stored"
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    assert hit.headers["x-cachegate-cached-tokens"] == "12"
    m, h = miss.json(), hit.json()
    assert h["id"] != m["id"] and h["id"].startswith("chatcmpl-" if kind == "chat" else "cmpl-")
    assert isinstance(h["created"], int)
    assert h["usage"] == as_hit(m["usage"])
    same = {"id": h["id"], "created": h["created"], "usage": h["usage"]}
    same |= {"service_tier": None} if "service_tier" in m else {}  # no tier served it
    assert h == m | same
    assert list(h) == list(m)  # in the upstream's order too
    assert h["model"] == DATED and h["system_fingerprint"] == FINGERPRINT


@pytest.mark.parametrize("kind", ["chat", "completion"])
@pytest.mark.parametrize("miss_streamed", [True, False], ids=["after-stream", "after-body"])
def test_a_streamed_hit_carries_the_upstreams_model_and_fingerprint(
    gw: Gateway, up: Scripted, key: str, kind: str, miss_streamed: bool
) -> None:
    scripted(up)
    options = {"stream": True, "stream_options": {"include_usage": True}}
    path, body = request(kind, f"How far away is the moon? ({kind}, {miss_streamed})")
    with gw.http(key) as http:
        miss = http.post(path, json=body | options if miss_streamed else body)
        hit = http.post(path, json=body | options)
    assert miss.status_code == 200 and hit.status_code == 200, (miss.text, hit.text)
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    events = sse_payloads(hit.text)
    *answer, last = events
    assert answer and all(e["model"] == DATED for e in events)
    assert all(e["system_fingerprint"] == FINGERPRINT for e in events)
    assert len({e["id"] for e in events}) == 1 and events[0]["id"] != "up-1"
    assert all(c["logprobs"] is None for e in answer for c in e["choices"])
    if kind == "chat":
        text = "".join(e["choices"][0]["delta"].get("content", "") for e in answer)
    else:
        text = "".join(e["choices"][0]["text"] for e in answer)
    assert text == f"An answer to: {body.get('prompt') or body['messages'][0]['content']}"
    assert answer[-1]["choices"][0]["finish_reason"] == "stop"
    assert last["choices"] == [] and last["usage"]["prompt_tokens_details"]["cached_tokens"] == 12
    if miss_streamed:  # each miss chunk's head, and the hit's, name the same fields
        heads = {tuple(sorted(set(e) - {"usage"})) for e in sse_payloads(miss.text)}
        assert {tuple(sorted(set(e) - {"usage"})) for e in events} == heads
        # the stream's usage details are kept with the answer and replayed
        assert last["usage"] == as_hit(sse_payloads(miss.text)[-1]["usage"])
        assert all(e["service_tier"] is None for e in events)  # the client named none
    else:  # replayed from a body: its usage details too
        assert last["usage"] == as_hit(miss.json()["usage"])
        assert all(e.get("service_tier") is None for e in events)


def test_a_streamed_hit_of_a_chinese_answer_streams_and_ends_as_the_body(
    gw: Gateway, up: Scripted, key: str
) -> None:
    # Chinese has no spaces: the whole answer was one delta (a review, session 44), and
    # the body's choice fields (vLLM's stop_reason) were left out of the finish chunk.
    text = "您可以在登录页面点击“忘记密码”，然后按照邮件中的步骤重置密码。客服时间是周一至周五。"
    stored = chat_answer(text)
    stored["choices"][0]["stop_reason"] = 128009
    scripted(up, stored)
    path, body = request("chat", "How do I reset my sign-in password? (in Chinese)")
    with gw.http(key) as http:
        assert http.post(path, json=body).headers["x-cachegate-backfill"] == "stored"
        hit = http.post(path, json=body | {"stream": True})
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    events = sse_payloads(hit.text)
    deltas = [e["choices"][0]["delta"].get("content") for e in events[1:-1]]
    assert len(deltas) > 1 and "".join(deltas) == text
    finish = events[-1]["choices"][0]
    assert finish["finish_reason"] == "stop" and finish["stop_reason"] == 128009


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_a_stream_the_client_asked_no_usage_of_still_keeps_its_details(
    gw: Gateway, up: Scripted, key: str, kind: str
) -> None:
    # The gateway asks for the usage chunk itself and takes it out of the client's
    # stream; the answer it stores keeps the upstream's usage details all the same.
    scripted(up)
    path, body = request(kind, f"What is the boiling point of water? ({kind})")
    with gw.http(key) as http:
        miss = http.post(path, json=body | {"stream": True})
        hit = http.post(path, json=body)
    assert all("usage" not in e for e in sse_payloads(miss.text))  # not asked, not sent
    assert hit.headers["x-cachegate-cache"] == "semantic-hit", hit.headers
    assert hit.json()["usage"] == as_hit(USAGE)
    assert hit.json()["service_tier"] is None  # no tier served the hit


@pytest.mark.parametrize(
    "odd",
    [
        {"usage": ["not", "a", "map"]},
        {"usage": {"prompt_tokens": 4, "completion_tokens": 2, "prompt_tokens_details": "x"}},
        {"model": 42},
        {"model": {"name": DATED}},
        {"model": None, "usage": "12 tokens"},
    ],
    ids=["list-usage", "text-details", "int-model", "object-model", "null-model-text-usage"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_an_odd_stored_answer_is_still_served(
    gw: Gateway, up: Scripted, key: str, odd: dict[str, Any], stream: bool
) -> None:
    question = f"What is the capital of France? {sorted(odd)} {stream}"
    scripted(up, chat_answer(f"Paris. {question}") | odd)
    path, body = request("chat", question)
    options = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    with gw.http(key) as http:
        miss = http.post(path, json=body)
        hit = http.post(path, json=body | options)
    assert miss.headers["x-cachegate-backfill"] == "stored", miss.text
    assert hit.status_code == 200, hit.text
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    model = odd.get("model", DATED)
    expected_model = model if isinstance(model, str) else MODEL  # the alias asked for
    if not stream:
        h = hit.json()
        assert h["choices"][0]["message"]["content"] == f"Paris. {question}"
        assert h["model"] == expected_model
        assert h["usage"]["prompt_tokens_details"]["cached_tokens"] == h["usage"]["prompt_tokens"]
        if not isinstance(odd.get("usage", {}), dict):
            assert h["usage"] == usage(0, 0, 0)  # as before: mangled counts count 0
        return
    events = sse_payloads(hit.text)
    assert all(e["model"] == expected_model for e in events)
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
    assert text == f"Paris. {question}"


# ----------------------------------------------------------------- what is never replayed


def test_request_bound_and_unreplayable_fields_are_not_replayed() -> None:
    """A stored answer from an older version (before the cache refused such answers)
    or with fields that belong to the request that produced it: another question's hit
    never carries them set."""
    stored = chat_answer("Paris.")
    stored["prompt_logprobs"] = [None, {"1": {"logprob": -1.0}}]
    stored["kv_transfer_params"] = {"remote_block_ids": [1, 2]}
    stored["choices"][0]["message"] |= {
        "tool_calls": [{"id": "call_1", "type": "function"}],
        "function_call": {"name": "f"},
        "audio": {"id": "audio_1"},
        "refusal": "I can't.",
    }
    body = replayed_body("chat", "chatcmpl-new", MODEL, stored, usage(12, 3, 12))
    assert "prompt_logprobs" not in body and "kv_transfer_params" not in body
    message = body["choices"][0]["message"]
    assert set(message) == {"role", "content", "annotations", "reasoning_content"}
    assert body["model"] == DATED and body["system_fingerprint"] == FINGERPRINT
    shape = answer_shape("chat", stored)
    assert shape.chunk_fields() == {"system_fingerprint": FINGERPRINT, "service_tier": "default"}


def test_a_hits_usage_keeps_the_details_and_reports_the_prompt_cached() -> None:
    stored = {
        "prompt_tokens": 10,
        "completion_tokens": 4,
        "total_tokens": 14,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 2},
        "prompt_cache_hit_tokens": 0,  # DeepSeek's names for the same accounting
        "prompt_cache_miss_tokens": 10,
    }
    assert replayed_usage(stored, 10, 4) == stored | {
        "prompt_tokens_details": {"cached_tokens": 10, "audio_tokens": 0},
        "prompt_cache_hit_tokens": 10,
        "prompt_cache_miss_tokens": 0,
    }
    assert replayed_usage(["odd"], 0, 0) == usage(0, 0, 0)
    assert replayed_usage({"prompt_tokens_details": None}, 3, 1) == usage(3, 1, 3)
