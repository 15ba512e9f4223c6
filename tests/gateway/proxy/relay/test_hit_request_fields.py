"""A semantic hit against the OpenAI API's reading of the request (a review, session 47).

Through the real gateway in front of a scripted vLLM-like upstream:

- a hit after a streamed miss ends with the ``stop_reason`` the upstream's stream
  ended with (``gateway/proxy/passthrough.py`` keeps it), as one after a body does;
  an upstream that never names one gets none invented;
- a hit reports ``service_tier`` null, whatever tier the client asked for, never the
  tier of the request that filled the cache (``hit_tier.py``): no tier served it;
- a request whose ``service_tier``, ``store``, ``metadata``, ``safety_identifier``,
  ``prompt_cache_key``, ``request_id`` or ``priority`` has a value the API (or vLLM)
  refuses skips the cache (``cacheable.py``): the upstream decides, nothing is stored.
Each beside its control.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.proxy.cacheable import mistyped_ignored_field, unreplayable_request
from gateway.proxy.passthrough import StreamAssembly
from tests.gateway.conftest import Gateway, sse_payloads
from tests.gateway.proxy.relay.support import CHAT, MODEL, Scripted

COMPLETIONS = "/v1/completions"
UPSTREAM_TIER = "priority"  # the tier of the request that filled the cache
USE = {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}
NO_STOP_REASON = object()  # the upstream names no stop_reason at all


def answer_text(kind: str, body: dict[str, Any]) -> str:
    question = body["messages"][-1]["content"] if kind == "chat" else body["prompt"]
    return f"Answer: {question}"


def body_answer(kind: str, text: str, stop: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": "stop"}
    if kind == "chat":
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    if stop is not NO_STOP_REASON:
        choice["stop_reason"] = stop
    obj = "chat.completion" if kind == "chat" else "text_completion"
    return {"id": "up", "object": obj, "created": 1, "model": MODEL, "choices": [choice],
            "usage": USE, "service_tier": UPSTREAM_TIER}  # fmt: skip


def streamed(kind: str, text: str, stop: Any) -> Response:
    """As vLLM streams: ``stop_reason`` null on every chunk, the finishing one's set."""
    obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
    head = {"id": "up", "object": obj, "created": 1, "model": MODEL,
            "service_tier": UPSTREAM_TIER}  # fmt: skip

    def choice(piece: str, finish: str | None, reason: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
        out |= {"delta": {"content": piece}} if kind == "chat" else {"text": piece}
        return out if stop is NO_STOP_REASON else out | {"stop_reason": reason}

    events = [head | {"choices": [choice(p, None, None)]} for p in (text[:7], text[7:])]
    events.append(head | {"choices": [choice("", "stop", stop)]})
    events.append(head | {"choices": [], "usage": USE})
    raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return Response(raw, media_type="text/event-stream")


def scripted(up: Scripted, calls: list[dict[str, Any]], stop: Any = None) -> None:
    async def handler(body: dict[str, Any], request: Request) -> Response:
        calls.append(body)
        kind = "chat" if "messages" in body else "completion"
        text = answer_text(kind, body)
        if body.get("stream"):
            return streamed(kind, text, stop)
        return JSONResponse(body_answer(kind, text, stop))

    up.handler = handler


def ask(http: httpx.Client, kind: str, question: str, stream: bool, **extra: Any) -> httpx.Response:
    if kind == "chat":
        body = {"model": MODEL, "messages": [{"role": "user", "content": question}]}
    else:
        body = {"model": MODEL, "prompt": question}
    got = http.post(CHAT if kind == "chat" else COMPLETIONS, json=body | extra | {"stream": stream})
    assert got.status_code == 200, got.text
    return got


def hit_after(http: httpx.Client, kind: str, question: str, stream: bool, **extra: Any) -> Any:
    """The hit's last choice and top-level fields; a streamed miss is stored after [DONE]."""
    for _ in range(50):
        got = ask(http, kind, question, stream, **extra)
        if got.headers["x-cachegate-cache"] == "semantic-hit":
            if not stream:
                return got.json()["choices"][0], [got.json()]
            events = sse_payloads(got.text)
            return events[-1]["choices"][0], events
        time.sleep(0.1)
    raise AssertionError(f"no hit: {got.headers.get('x-cachegate-semantic')}")


@pytest.mark.parametrize("kind", ["chat", "completion"])
@pytest.mark.parametrize("stop", [128009, "</answer>", None, NO_STOP_REASON],
                         ids=["token", "string", "null", "absent"])  # fmt: skip
@pytest.mark.parametrize("miss_stream", [True, False], ids=["miss-stream", "miss-body"])
def test_a_streamed_hit_ends_with_the_upstreams_stop_reason(
    gw: Gateway, up: Scripted, kind: str, stop: Any, miss_stream: bool
) -> None:
    calls: list[dict[str, Any]] = []
    scripted(up, calls, stop)
    question = f"Why do leaves turn red? ({kind}, {stop!r:.8}, {miss_stream})"
    with gw.http(gw.tenant("hit-stop-reason")[1]) as http:
        ask(http, kind, question, miss_stream)
        last, _ = hit_after(http, kind, question, stream=True)
        body_choice, _ = hit_after(http, kind, question, stream=False)
    assert last["finish_reason"] == "stop" and body_choice["finish_reason"] == "stop"
    if stop is NO_STOP_REASON:  # the control: none named, none invented
        assert "stop_reason" not in last and "stop_reason" not in body_choice
    else:
        assert last["stop_reason"] == stop and body_choice["stop_reason"] == stop
    assert len(calls) == 1


@pytest.mark.parametrize("kind", ["chat", "completion"])
@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_a_hit_reports_no_service_tier_served_it(
    gw: Gateway, up: Scripted, kind: str, stream: bool
) -> None:
    calls: list[dict[str, Any]] = []
    scripted(up, calls)
    question = f"How tall is Mount Everest? ({kind}, {stream})"
    with gw.http(gw.tenant("hit-tier")[1]) as http:
        miss = ask(http, kind, question, stream)
        _, named = hit_after(http, kind, question, stream, service_tier="flex")
        _, unnamed = hit_after(http, kind, question, stream)
    # the control: a miss reports the tier the upstream served it with
    tiers = [e["service_tier"] for e in (sse_payloads(miss.text) if stream else [miss.json()])]
    assert set(tiers) == {UPSTREAM_TIER}
    assert [e["service_tier"] for e in named] == [None] * len(named)
    assert [e["service_tier"] for e in unnamed] == [None] * len(unnamed)
    assert len(calls) == 1


WELL_TYPED: list[dict[str, Any]] = [
    {"metadata": {"team": "search"}},
    {"metadata": None},
    {"store": True},
    {"store": None},
    {"service_tier": "auto"},
    {"service_tier": "flex"},
    {"service_tier": "priority"},
    {"service_tier": None},
    {"safety_identifier": "user-7f3a"},
    {"prompt_cache_key": "faq-v2"},
    {"request_id": "client-7"},
    {"priority": 0},
    {"priority": -3},
    {"priority": 2.0},
]
MISTYPED: list[tuple[dict[str, Any], str]] = [
    ({"metadata": 5}, "metadata"),
    ({"metadata": {"team": 1}}, "metadata"),
    ({"metadata": ["a"]}, "metadata"),
    ({"store": "yes"}, "store"),
    ({"store": 1}, "store"),
    ({"service_tier": 7}, "service_tier"),
    ({"service_tier": True}, "service_tier"),
    ({"service_tier": "gold"}, "service_tier"),  # a string, but no tier OpenAI has
    ({"service_tier": "AUTO"}, "service_tier"),
    # session 50's review: these had been hits, where OpenAI and vLLM answer 400
    ({"safety_identifier": {"a": 1}}, "safety_identifier"),
    ({"prompt_cache_key": 5}, "prompt_cache_key"),
    ({"request_id": 12345}, "request_id"),
    ({"priority": "high"}, "priority"),
    ({"priority": True}, "priority"),
    ({"priority": 1.5}, "priority"),
]


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_a_mistyped_ignored_field_skips_the_cache(gw: Gateway, up: Scripted, kind: str) -> None:
    calls: list[dict[str, Any]] = []
    scripted(up, calls)
    question = f"What is the boiling point of water? ({kind})"
    with gw.http(gw.tenant("hit-mistyped")[1]) as http:
        ask(http, kind, question, False)
        for extra in WELL_TYPED:  # the control: the same question, well typed, is a hit
            got = ask(http, kind, question, False, **extra)
            assert got.headers["x-cachegate-cache"] == "semantic-hit", extra
        assert len(calls) == 1
        for extra, reason in MISTYPED:
            got = ask(http, kind, question, False, **extra)
            assert got.headers["x-cachegate-semantic"] == f"skipped:{reason}", extra
            assert calls[-1][reason] == extra[reason]  # the upstream decides, as sent
        assert len(calls) == 1 + len(MISTYPED)
        # not stored either: a new question asked mistyped leaves the cache empty of it
        fresh = f"Who wrote the novel Moby Dick? ({kind})"
        skipped = ask(http, kind, fresh, False, store="yes").headers["x-cachegate-semantic"]
        assert skipped == "skipped:store"
        assert ask(http, kind, fresh, False).headers["x-cachegate-semantic"].startswith("miss")


def test_the_assembly_keeps_the_stop_reason_the_stream_ended_with() -> None:
    def chunk(finish: str | None, **stop: Any) -> dict[str, Any]:
        return {"choices": [{"index": 0, "text": "x", "finish_reason": finish} | stop]}

    def stored(*chunks: dict[str, Any]) -> dict[str, Any]:
        assembly = StreamAssembly("completion")
        for c in chunks:
            assembly.add(c)
        assert "error" not in assembly.body(dict(USE))
        return dict(assembly.body(dict(USE))["choices"][0])

    set_then_null = stored(chunk(None, stop_reason=None), chunk("stop", stop_reason=7),
                           chunk(None, stop_reason=None))  # fmt: skip
    assert set_then_null["stop_reason"] == 7  # a later null never undoes a set one
    assert stored(chunk(None, stop_reason=None), chunk("stop", stop_reason=None)) == {
        "index": 0, "finish_reason": "stop", "logprobs": None, "stop_reason": None, "text": "xx"
    }  # fmt: skip
    assert "stop_reason" not in stored(chunk(None), chunk("stop"))  # the control: none named
    assert "stop_reason" not in stored(chunk("stop", stop_reason={"odd": 1}))  # not stored


def test_mistyped_ignored_fields_are_named_never_quoted() -> None:
    for extra in WELL_TYPED:
        assert mistyped_ignored_field(extra) is None, extra
    for extra, reason in MISTYPED:
        assert mistyped_ignored_field(extra) == reason
    secret = {"metadata": {"note": ["my password is hunter2"]}}
    assert unreplayable_request({"model": MODEL, "prompt": "hi"} | secret) == "metadata"
