"""What a hit keeps of a vLLM / OpenAI answer beyond its text, and which vLLM requests
a hit could not answer (a review, session 41).

Through the real gateway in front of a scripted upstream:

- a reasoning model's thinking under vLLM's current field name ``reasoning`` (it was
  ``reasoning_content``, still replayed) comes back on every path: streamed or not,
  after a streamed miss or a body;
- a search model's ``annotations`` (url citations, streamed by OpenAI in a delta of
  their own) are kept from a streamed miss and sent by a streamed hit;
- ``prompt_logprobs``, ``return_token_ids`` and ``stream_options.continuous_usage_stats``
  ask for what only the model's own run has (the prompt's logprobs, token ids, running
  usage on every chunk): such requests skip the cache, each beside its control.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from tests.gateway.conftest import Gateway, sse_payloads
from tests.gateway.proxy.relay.support import CHAT, MODEL, Scripted

CITES = [
    {
        "type": "url_citation",
        "url_citation": {"start_index": 0, "end_index": 5, "url": "https://a.example/x"},
    }
]


def answer(text: str, extra: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": text} | extra
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
    use = {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}
    return {"id": "up", "object": "chat.completion", "created": 1, "model": MODEL,
            "choices": [choice], "usage": use}  # fmt: skip


def streamed(text: str, extra: dict[str, Any], include_usage: bool) -> Response:
    """As vLLM streams reasoning (its deltas first) and OpenAI citations (a delta of
    their own near the end); the usage chunk when asked (the gateway asks for it)."""
    head = {"id": "up", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    for name, value in extra.items():
        if isinstance(value, str):
            deltas += [{name: value[:9]}, {name: value[9:]}]
    deltas += [{"content": text[:7]}, {"content": text[7:]}]
    deltas += [{name: v} for name, v in extra.items() if isinstance(v, list)]
    events = [
        head | {"choices": [{"index": 0, "delta": d, "logprobs": None, "finish_reason": None}]}
        for d in deltas
    ]
    last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    events.append(head | {"choices": [last]})
    if include_usage:
        use = {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}
        events.append(head | {"choices": [], "usage": use})
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return Response(body, media_type="text/event-stream")


def scripted(up: Scripted, extra: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    async def handler(body: dict[str, Any], request: Request) -> Response:
        calls.append(body)
        text = f"Answer: {body['messages'][-1]['content']}"
        if body.get("stream"):
            usage = (body.get("stream_options") or {}).get("include_usage") is True
            return streamed(text, extra, usage)
        return JSONResponse(answer(text, extra))

    up.handler = handler


def ask(http: httpx.Client, question: str, stream: bool, **extra: Any) -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": question}]} | extra
    return http.post(CHAT, json=body | ({"stream": True} if stream else {}))


def hit_after(http: httpx.Client, question: str, stream: bool) -> httpx.Response:
    """The hit; a streamed miss's answer is stored just after its [DONE]."""
    for _ in range(50):
        got = ask(http, question, stream)
        if got.headers["x-cachegate-cache"] == "semantic-hit":
            return got
        time.sleep(0.1)
    raise AssertionError(f"no hit: {got.headers.get('x-cachegate-semantic')}")


def message_of(got: httpx.Response, stream: bool) -> dict[str, Any]:
    """The message a client SDK assembles from the response."""
    if not stream:
        return dict(got.json()["choices"][0]["message"])
    out: dict[str, Any] = {}
    for event in sse_payloads(got.text):
        for choice in event["choices"]:
            for name, value in choice["delta"].items():
                if isinstance(value, str):
                    out[name] = out.get(name, "") + value
                elif isinstance(value, list):
                    out[name] = out.get(name, []) + value
    return out


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
@pytest.mark.parametrize("miss_stream", [False, True], ids=["miss-body", "miss-stream"])
@pytest.mark.parametrize("hit_stream", [False, True], ids=["hit-body", "hit-stream"])
def test_a_hit_keeps_the_reasoning_under_either_name(
    gw: Gateway, up: Scripted, field: str, miss_stream: bool, hit_stream: bool
) -> None:
    calls: list[dict[str, Any]] = []
    thinking = "The user asks about Rayleigh scattering."
    scripted(up, {field: thinking}, calls)
    question = f"Why is the sky blue? {field} {miss_stream} {hit_stream}"
    with gw.http(gw.tenant("reasoning")[1]) as http:
        miss = ask(http, question, miss_stream)
        assert message_of(miss, miss_stream)[field] == thinking  # the control: as sent
        hit = hit_after(http, question, hit_stream)
    got = message_of(hit, hit_stream)
    assert got[field] == thinking and got["content"] == f"Answer: {question}"


@pytest.mark.parametrize("miss_stream", [False, True], ids=["miss-body", "miss-stream"])
@pytest.mark.parametrize("hit_stream", [False, True], ids=["hit-body", "hit-stream"])
def test_a_hit_keeps_the_citations(
    gw: Gateway, up: Scripted, miss_stream: bool, hit_stream: bool
) -> None:
    calls: list[dict[str, Any]] = []
    scripted(up, {"annotations": CITES}, calls)
    question = f"Who won the 2022 world cup? {miss_stream} {hit_stream}"
    with gw.http(gw.tenant("citations")[1]) as http:
        miss = ask(http, question, miss_stream)
        assert message_of(miss, miss_stream)["annotations"] == CITES  # the control
        hit = hit_after(http, question, hit_stream)
    got = message_of(hit, hit_stream)
    assert got["annotations"] == CITES and got["content"] == f"Answer: {question}"
    if hit_stream:  # whole, in one delta before the finish, as OpenAI sends them
        deltas = [e["choices"][0]["delta"] for e in sse_payloads(hit.text) if e["choices"]]
        assert [d for d in deltas if "annotations" in d] == [{"annotations": CITES}]
        assert deltas[-1] == {}


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"prompt_logprobs": 1}, "logprobs"),
        ({"prompt_logprobs": 0}, "logprobs"),
        ({"return_token_ids": True}, "token_ids"),
        ({"return_tokens_as_token_ids": True}, "token_ids"),
        ({"stream": True, "stream_options": {"continuous_usage_stats": True}}, "continuous_usage"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),  # not streamed
    ],
)
def test_requests_for_what_only_the_models_run_has_skip_the_cache(
    gw: Gateway, up: Scripted, extra: dict[str, Any], reason: str
) -> None:
    calls: list[dict[str, Any]] = []
    scripted(up, {}, calls)
    question = f"What is the capital of France? {sorted(extra)}"
    extra = dict(extra)
    stream = extra.pop("stream", False)
    with gw.http(gw.tenant("vllm-extras")[1]) as http:
        for _ in range(2):
            got = ask(http, question, stream, **extra)
            assert got.status_code == 200, got.text
            assert got.headers["x-cachegate-semantic"] == f"skipped:{reason}"
        assert len(calls) == 2  # both reached the model, with what they asked for
        for sent in calls:
            options = sent.get("stream_options") or {}
            assert all(
                sent.get(k) == v or options.get("continuous_usage_stats") for k, v in extra.items()
            )
        # the control: the same question without it is stored and then a hit
        ask(http, question, stream)
        assert hit_after(http, question, stream).status_code == 200
