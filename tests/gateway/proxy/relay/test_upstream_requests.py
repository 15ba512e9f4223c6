"""What the client sends reaches the upstream, and what the gateway adds is right.

Null flags mean their defaults; completion fields our own engine refuses are
forwarded to an HTTP upstream unchanged; an answer that is not streamed waits for
the response timeout, a stream only for its read timeout; every error carries the
request id and a client's request id is made unique before the upstream (the
embeddings and responses routes: test_upstream_embeddings.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.errors import UpstreamTimeoutError
from gateway.proxy.engine_pool import EnginePool
from gateway.proxy.upstream import UpstreamRequest
from gateway.settings import Settings
from tests.gateway.conftest import Gateway, sse_payloads
from tests.gateway.proxy.relay.support import (
    CHAT,
    DONE,
    MODEL,
    Scripted,
    answer,
    ask,
    chunk,
    pool_request,
    sse,
)

# ----------------------------------------------------------------- null flags


def test_null_stream_flags_mean_their_default(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    # The OpenAI spec (and vLLM's schema) make `stream` and `include_usage` nullable:
    # a body the upstream would answer must not be a 400 from the gateway.
    received: list[dict[str, Any]] = []

    async def handler(body: dict[str, Any], request: Request) -> Response:
        received.append(body)
        if body.get("stream"):
            return sse(chunk({"role": "assistant", "content": "Ok."}), chunk({}, "stop"), DONE)
        return JSONResponse(answer("Ok."))

    up.handler = handler
    with gw.http(tenant[1]) as http:
        whole = http.post(CHAT, json=ask("null stream", stream=None))
        options = {"include_usage": None}
        streamed = http.post(CHAT, json=ask("null usage", stream=True, stream_options=options))
    assert whole.status_code == 200, whole.text
    assert whole.json()["choices"][0]["message"]["content"] == "Ok."
    assert received[0]["stream"] is None  # forwarded as the client sent it
    assert streamed.status_code == 200, streamed.text
    chunks = sse_payloads(streamed.text)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in c for c in chunks)  # null: not asked for


def test_whole_number_floats_and_many_stops_reach_the_upstream_as_sent(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    """vLLM and SGLang read ``max_tokens: 100.0`` as 100 and take any number of stop
    sequences: a client that works against them directly must work through the gateway
    (the OpenAI API's own 4-stop and integer rules were refused here before). The
    controls: a fractional count and a string count are still a 400, never forwarded."""
    received: list[dict[str, Any]] = []

    async def handler(body: dict[str, Any], request: Request) -> Response:
        received.append(body)
        return JSONResponse(answer("Ok."))

    up.handler = handler
    stops = [f"STOP{i}" for i in range(8)]
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("whole floats", max_tokens=100.0, seed=7.0, stop=stops))
        assert r.status_code == 200, r.text
        assert received[-1]["max_tokens"] == 100.0 and isinstance(received[-1]["max_tokens"], float)
        assert received[-1]["stop"] == stops and received[-1]["seed"] == 7.0
        count = len(received)
        for bad in ({"max_tokens": 100.5}, {"max_tokens": "100"}, {"n": True}):
            refused = http.post(CHAT, json=ask("bad count", **bad))
            assert refused.status_code == 400, (bad, refused.text)
            assert refused.json()["error"]["param"] == next(iter(bad))
        assert len(received) == count  # none of them reached the upstream


@pytest.mark.parametrize(
    "extra",
    [{"echo": True}, {"suffix": " and that is all."}, {"best_of": 3}, {"logprobs": 0}],
    ids=["echo", "suffix", "best_of", "logprobs-0"],
)
def test_completion_fields_our_engine_refuses_are_forwarded_unchanged(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], extra: dict[str, Any]
) -> None:
    # Only the in-process engine cannot honour them (a 400 unsupported_parameter there:
    # tests/protocol/test_openai_unsupported.py); an HTTP upstream gets them as sent.
    received: list[dict[str, Any]] = []

    async def complete(body: dict[str, Any], request: Request) -> Response:
        received.append(body)
        choice = {"index": 0, "text": " Paris.", "finish_reason": "stop", "logprobs": None}
        return JSONResponse({"id": "cmpl-up", "object": "text_completion", "created": 1,
                             "model": MODEL, "choices": [choice]})  # fmt: skip

    up.handler = complete
    body = {"model": MODEL, "prompt": f"The capital of France is {extra}", "max_tokens": 4}
    with gw.http(tenant[1]) as http:
        r = http.post("/v1/completions", json=body | extra)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == " Paris."
    assert {k: received[-1].get(k) for k in extra} == extra
    if "best_of" not in extra:  # a cached text answer cannot replay these
        assert r.headers["x-cachegate-backfill"] == "skipped:not_cacheable"


IPYTHON = {"role": "ipython", "content": "42"}  # Llama 3's tool-result turn (vLLM takes it)
UNTYPED = {"role": "user", "content": [{"image_url": {"url": "http://x/cat.png"}}]}


@pytest.mark.parametrize(
    ("messages", "semantic"),
    [
        # a custom role after the question: no standalone question, nothing looked up
        ([{"role": "user", "content": "What is 6 times 7?"}, IPYTHON], "skipped:"),
        # before it: part of the context, which keys the partition exactly
        ([IPYTHON, {"role": "user", "content": "And what is that plus one?"}], "miss"),
        # vLLM's shorthand part with no type: media, never looked up
        ([UNTYPED], "skipped:"),
    ],
    ids=["role-after", "role-before", "untyped-part"],
)
def test_roles_and_parts_an_upstream_may_take_reach_it_as_sent(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], messages: list[Any], semantic: str
) -> None:
    # The built-in engine refuses both (400, tests/prefix/server_support.py BAD_INPUT);
    # an HTTP upstream judges them itself: they were a 400 here before it saw them.
    received: list[dict[str, Any]] = []

    async def handler(body: dict[str, Any], request: Request) -> Response:
        received.append(body)
        return JSONResponse(answer("43."))

    up.handler = handler
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("x") | {"messages": messages})
    assert r.status_code == 200, r.text
    assert received[-1]["messages"] == messages
    assert r.headers["x-cachegate-semantic"].startswith(semantic), r.headers


@pytest.mark.parametrize(
    "prompt",
    [["The capital of France is", "The capital of Italy is"], [[791, 6864], [791, 6864, 315]]],
    ids=["strings", "token-lists"],
)
def test_a_batch_of_prompts_is_forwarded_uncached(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], prompt: list[Any]
) -> None:
    """OpenAI's completions take several prompts a request (a choice each); vLLM too.
    The built-in engine refuses them (tests/protocol/test_openai_unsupported.py); an
    HTTP upstream gets them, and the answer, several, is neither looked up nor stored.
    A one-prompt list is the control: cached as its string would be."""
    received: list[Any] = []

    async def complete(body: dict[str, Any], request: Request) -> Response:
        received.append(body["prompt"])
        many = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        choices = [
            {"index": i, "text": f" answer {i}.", "finish_reason": "stop", "logprobs": None}
            for i in range(len(many))
        ]
        counts = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
        return JSONResponse({"id": "cmpl-up", "object": "text_completion", "created": 1,
                             "model": MODEL, "choices": choices, "usage": counts})  # fmt: skip

    up.handler = complete
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 4}
    with gw.http(tenant[1]) as http:
        first, again = (http.post("/v1/completions", json=body) for _ in range(2))
        single = {"model": MODEL, "prompt": ["The capital of Spain is"], "max_tokens": 4}
        stored, hit = (http.post("/v1/completions", json=single) for _ in range(2))
    assert first.status_code == 200, first.text
    assert [c["text"] for c in first.json()["choices"]] == [" answer 0.", " answer 1."]
    assert first.headers["x-cachegate-semantic"] == "skipped:batch"
    assert again.headers["x-cachegate-cache"] != "semantic-hit"
    assert received[:2] == [prompt, prompt]  # as sent, both times
    assert stored.headers["x-cachegate-backfill"] == "stored"
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"


# ----------------------------------------------------------------- timeouts


def test_an_answer_not_streamed_waits_for_the_response_timeout(up: Scripted) -> None:
    # Not streamed, the upstream sends nothing until the whole answer is generated: the
    # read timeout (between a stream's chunks) would make a long answer a 504 that works
    # against the server directly. It waits the longer response timeout instead.
    async def slow(body: dict[str, Any], request: Request) -> Response:
        await asyncio.sleep(0.8)
        if body.get("stream"):
            return sse(chunk({"role": "assistant", "content": "Late."}), chunk({}, "stop"))
        return JSONResponse(answer("Late."))

    up.handler = slow

    async def main() -> None:
        pool = EnginePool.from_urls(
            [up.url], model=MODEL, dialect_name="vllm", read_timeout=0.3, response_timeout=5
        )
        try:
            whole = [e async for e in pool.stream(pool_request("a long answer"))]
            assert whole[-1].body == answer("Late.")  # type: ignore[union-attr]
            streamed = UpstreamRequest("chat", ask("a slow stream", stream=True), "ns", "r")
            with pytest.raises(UpstreamTimeoutError):  # a stream keeps the read timeout
                async for _ in pool.stream(streamed):
                    pass
        finally:
            await pool.aclose()

    asyncio.run(main())
    assert Settings.model_fields["upstream_response_timeout"].default == 600.0


# ----------------------------------------------------------------- request ids, other routes


def test_every_error_carries_the_request_id(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    async def refuse(body: dict[str, Any], request: Request) -> Response:
        error = {"message": "too long", "type": "invalid_request_error", "param": None}
        echo = {"x-request-id": request.headers["x-request-id"]}
        return JSONResponse({"error": error | {"code": None}}, status_code=400, headers=echo)

    up.handler = refuse
    mine = {"x-request-id": "client-req-42"}
    with gw.http(tenant[1]) as http:
        bad_body = http.post(CHAT, json={"model": MODEL, "messages": 5}, headers=mine)
        no_model = http.post(CHAT, json=ask("x") | {"model": "nope"}, headers=mine)
        wrong_method = http.get(CHAT, headers=mine)
        refused = http.post(CHAT, json=ask("refused upstream"), headers=mine)
        generated = http.post(CHAT, json={"model": MODEL, "messages": 5})
    for r, status in [(bad_body, 400), (no_model, 404), (wrong_method, 405), (refused, 400)]:
        assert r.status_code == status, r.text
        assert r.headers.get_list("x-request-id") == ["client-req-42"], r.headers
    assert wrong_method.headers["allow"] == "POST"
    assert "x-upstream-request-id" not in refused.headers  # only ours, echoed
    assert generated.headers["x-request-id"].startswith("req-")
    anonymous = httpx.post(gw.url + CHAT, json=ask("no key"), headers=mine)
    assert anonymous.status_code == 401 and anonymous.headers["x-request-id"] == "client-req-42"


def test_model_cards_carry_the_request_id(gw: Gateway, tenant: tuple[str, str]) -> None:
    """Every answer carries X-Request-Id (an SDK reports it with a problem); the model
    list and card did not (a review)."""
    with gw.http(tenant[1]) as http:
        listed = http.get("/v1/models", headers={"x-request-id": "req-models-1"})
        card = http.get(f"/v1/models/{MODEL}")
        unknown = http.get("/v1/models/no-such-model")  # the control: errors always did
    assert listed.status_code == 200 and listed.headers["x-request-id"] == "req-models-1"
    assert card.status_code == 200 and card.headers["x-request-id"].startswith("req-")
    assert unknown.status_code == 404 and unknown.headers["x-request-id"]


def test_a_client_chosen_request_id_is_made_unique_before_the_upstream(
    gw: Gateway, up: Scripted
) -> None:
    """vLLM keys its engine by the X-Request-Id header (or the body's ``request_id``),
    SGLang by the body's ``rid``: two tenants choosing one id shared an engine key,
    and vLLM refuses or crashes on a duplicate (a review, session 45). The upstream
    gets the client's id with a suffix of its own; the client sees its id unchanged."""
    seen: list[tuple[str, Any, Any]] = []
    vectors = {"object": "list", "data": [{"object": "embedding", "index": 0,
               "embedding": [0.1]}], "model": MODEL,
               "usage": {"prompt_tokens": 1, "total_tokens": 1}}  # fmt: skip

    async def record(body: dict[str, Any], request: Request) -> Response:
        seen.append((request.headers["x-request-id"], body.get("request_id"), body.get("rid")))
        return JSONResponse(vectors if "input" in body else answer("hello"))

    up.handler = record
    same = {"x-request-id": "shared-7", "cache-control": "no-store, no-cache"}
    keys = {"request_id": "shared-7", "rid": ["shared-7", "other"]}
    answers = []
    for name in ("rid-x", "rid-y"):
        with gw.http(gw.tenant(name)[1]) as http:
            answers.append(http.post(CHAT, json=ask("Hi there") | keys, headers=same))
            answers.append(http.post(CHAT, json=ask("Hi") | keys | {"stream": True}, headers=same))
            embed = {"model": MODEL, "input": "hi", "request_id": "shared-7"}
            answers.append(http.post("/v1/embeddings", json=embed, headers=same))
    assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers]
    assert all(r.headers["x-request-id"] == "shared-7" for r in answers)  # the client's own
    headers, bodies = [s[0] for s in seen], [s[1] for s in seen]
    assert len(seen) == 6 and len(set(headers)) == 6 and len(set(bodies)) == 6, seen
    assert all(h.startswith("shared-7.") for h in headers)
    assert all(b.startswith("shared-7.") for b in bodies)
    rids = [s[2] for s in seen if s[2] is not None]
    assert len(rids) == 4 and len({r[0] for r in rids} | {r[1] for r in rids}) == 8
    assert all(r[0].startswith("shared-7.") and r[1].startswith("other.") for r in rids)
