"""What the upstream says besides its answer reaches the client as it said it.

A scripted upstream (its handler swapped per test) answers 429 and 503 with
``Retry-After``, sends rate-limit headers, bodies that Python's strict JSON
encoder refuses (``-Infinity``, a lone surrogate escape), and SSE error events
before and after the first chunk. The gateway must relay each faithfully: the
status, the upstream's error object, its allowlisted headers and its bytes, and
never store an answer it could not keep as it came.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from gateway.app import Components
from gateway.errors import UpstreamTimeoutError
from gateway.proxy.engine_pool import EnginePool
from gateway.proxy.upstream import UpstreamRequest, UpstreamStatusError
from gateway.settings import Settings
from semantic import Embedder
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway, sse_payloads
from tests.live_server import serving

CHAT = "/v1/chat/completions"
MODEL = "relay-model"
Handler = Callable[[dict[str, Any], Request], Awaitable[Response]]

RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for requests",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
OVERLOADED = {
    "error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}
}


class Scripted:
    """An OpenAI-compatible upstream whose chat answers come from ``handler``."""

    def __init__(self) -> None:
        self.handler: Handler | None = None
        self.url = ""

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        async def models() -> Response:
            card = {"id": MODEL, "object": "model", "owned_by": "vllm"}
            return JSONResponse({"object": "list", "data": [card]})

        async def respond(request: Request) -> Response:
            assert self.handler is not None
            return await self.handler(await request.json(), request)

        app.post("/v1/chat/completions")(respond)
        app.post("/v1/completions")(respond)
        app.post("/v1/embeddings")(respond)
        return app


def answer(text: str, **choice: Any) -> dict[str, Any]:
    first = {"index": 0, "message": {"role": "assistant", "content": text}}
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [first | {"finish_reason": "stop", "logprobs": None} | choice],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    return "data: " + json.dumps(body | {"choices": [choice]}) + "\n\n"


def sse(*events: str) -> Response:
    return Response("".join(events), media_type="text/event-stream")


def ask(question: str, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": question}]} | extra


@pytest.fixture(scope="module")
def up() -> Iterator[Scripted]:
    scripted = Scripted()
    with serving(scripted.app()) as url:
        scripted.url = url
        yield scripted


@pytest.fixture(scope="module")
def gw(
    up: Scripted, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("relay")
    settings = gateway_settings(data_dir, upstream_url=up.url)
    with running_gateway(settings, Components(embedder=embedder)) as gateway:
        yield gateway


@pytest.fixture
def tenant(gw: Gateway) -> tuple[str, str]:
    return gw.tenant("relay")


def entries(gw: Gateway, tenant_id: str) -> int:
    return gw.cache.entries.count(tenant=tenant_id)


# ----------------------------------------------------------------- 1. 429 and 503


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(
    ("status", "payload", "extra"),
    [
        (429, RATE_LIMITED, {"x-ratelimit-remaining-requests": "0"}),
        (503, OVERLOADED, {}),
    ],
    ids=["429", "503"],
)
def test_rate_limit_and_overload_keep_status_body_and_retry_after(
    gw: Gateway,
    up: Scripted,
    tenant: tuple[str, str],
    status: int,
    payload: dict[str, Any],
    extra: dict[str, str],
    stream: bool,
) -> None:
    async def refuse(body: dict[str, Any], request: Request) -> Response:
        return JSONResponse(payload, status_code=status, headers={"retry-after": "7"} | extra)

    up.handler = refuse
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"refused {status} {stream}", stream=stream))
    assert r.status_code == status, r.text
    assert r.json() == payload  # the upstream's error object, not a gateway 502
    assert r.headers["retry-after"] == "7"
    for name, value in extra.items():
        assert r.headers[name] == value


def _pool_request(question: str) -> UpstreamRequest:
    return UpstreamRequest("chat", ask(question), "ns-relay", "req-relay")


def test_pool_fails_over_a_429_without_marking_it_down_and_relays_the_last() -> None:
    calls = {"limited": 0, "ok": 0}

    def app(limited: bool) -> FastAPI:
        scripted = Scripted()

        async def handle(body: dict[str, Any], request: Request) -> Response:
            if limited:
                calls["limited"] += 1
                return JSONResponse(RATE_LIMITED, status_code=429, headers={"retry-after": "3"})
            calls["ok"] += 1
            return JSONResponse(answer("fine"))

        scripted.handler = handle
        return scripted.app()

    with serving(app(True)) as limited, serving(app(True)) as limited2, serving(app(False)) as ok:

        async def main() -> None:
            pool = EnginePool.from_urls([limited, ok], model=MODEL, dialect_name="vllm")
            both = EnginePool.from_urls([limited, limited2], model=MODEL, dialect_name="vllm")
            try:
                # A question the ring sends to the limited replica first.
                req = next(
                    r
                    for r in map(_pool_request, (f"q{i}" for i in range(100)))
                    if pool.ring.preference(pool.key(r))[0] == limited
                )
                for _ in range(3):
                    events = [e async for e in pool.stream(req)]
                    assert events[-1].body == answer("fine")  # type: ignore[union-attr]
                # Asked every time (not marked down), never counted as failed.
                assert calls == {"limited": 3, "ok": 3}
                assert all(s["is_up"] and s["failures"] == 0 for s in pool.replica_states())
                with pytest.raises(UpstreamStatusError) as caught:
                    async for _ in both.stream(_pool_request("q")):
                        pass
                assert caught.value.status == 429
                assert caught.value.body() == RATE_LIMITED
                assert caught.value.headers["retry-after"] == "3"
                assert all(s["is_up"] for s in both.replica_states())
            finally:
                await pool.aclose()
                await both.aclose()

        asyncio.run(main())


# ----------------------------------------------------------------- 2. upstream headers

PASSED = {
    "x-ratelimit-remaining-requests": "41",
    "x-ratelimit-reset-tokens": "1.5s",
    "openai-processing-ms": "12",
    "openai-version": "2020-10-01",
}
KEPT_BACK = {"set-cookie": "session=1", "x-internal-host": "10.0.0.7", "via": "edge-3"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_allowlisted_upstream_headers_reach_the_client(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], stream: bool
) -> None:
    async def with_headers(body: dict[str, Any], request: Request) -> Response:
        headers = PASSED | KEPT_BACK | {"x-request-id": "req_upstream_own_1"}
        # A value that is not ASCII is dropped, not mended (Latin-1 é on the wire).
        headers["x-ratelimit-limit-tokens"] = "10\u00e9"
        if body.get("stream"):
            events = chunk({"role": "assistant", "content": "Hi."}) + chunk({}, "stop")
            response = sse(events, "data: [DONE]\n\n")
            response.headers.update(headers)
            return response
        return JSONResponse(answer("Hi."), headers=headers)

    up.handler = with_headers
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"headers please {stream}", stream=stream))
    assert r.status_code == 200, r.text
    for name, value in PASSED.items():
        assert r.headers[name] == value
    for name in [*KEPT_BACK, "x-ratelimit-limit-tokens"]:
        assert name not in r.headers
    # The upstream's own request id, under its own name; ours stays the client's.
    assert r.headers["x-upstream-request-id"] == "req_upstream_own_1"
    assert r.headers["x-request-id"] != "req_upstream_own_1"
    assert r.headers["x-cachegate-cache"] == "miss"


def test_an_upstream_echoing_our_request_id_adds_no_header(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    async def echo(body: dict[str, Any], request: Request) -> Response:
        return JSONResponse(
            answer("Echo."), headers={"x-request-id": request.headers["x-request-id"]}
        )

    up.handler = echo
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("echo my id"), headers={"x-request-id": "client-id-42"})
    assert r.status_code == 200, r.text
    assert r.headers.get_list("x-request-id") == ["client-id-42"]
    assert "x-upstream-request-id" not in r.headers


# ----------------------------------------------------------------- 3. bodies strict JSON refuses


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps(
            answer("Yes.", logprobs={"content": [{"token": "Yes", "logprob": float("-inf")}]})
        ),
        json.dumps(answer("broken \ud83d emoji")),
        json.dumps(answer("not a number", extra=float("nan"))),
    ],
    ids=["-Infinity", "lone-surrogate", "NaN"],
)
def test_unencodable_bodies_pass_through_as_bytes_and_are_not_stored(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], raw: str
) -> None:
    async def odd(body: dict[str, Any], request: Request) -> Response:
        return Response(raw, media_type="application/json")

    up.handler = odd
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"odd body {raw[-40:]}"))
    assert r.status_code == 200, r.text
    assert r.content == raw.encode()  # the upstream's bytes, not a re-encoding
    assert r.headers["x-cachegate-backfill"] in {"skipped:not_storable", "skipped:not_cacheable"}
    assert entries(gw, tenant[0]) == 0


def test_streamed_lone_surrogate_is_forwarded_not_a_reset(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    async def odd(body: dict[str, Any], request: Request) -> Response:
        role = chunk({"role": "assistant", "content": ""})
        return sse(role, chunk({"content": "a \ud83d b"}), chunk({}, "stop"), "data: [DONE]\n\n")

    up.handler = odd
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("a streamed odd one", stream=True))
    assert r.status_code == 200
    assert "\\ud83d" in r.text  # the escape, as the upstream wrote it
    chunks = sse_payloads(r.text)
    assert chunks[1]["choices"][0]["delta"]["content"] == "a \ud83d b"
    assert entries(gw, tenant[0]) == 0


# ----------------------------------------------------------------- 4. SSE error events


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (
            {
                "message": "prompt too long",
                "type": "BadRequestError",
                "param": "messages",
                "code": 400,
            },
            400,
        ),
        ({"message": "engine died", "type": "server_error", "param": None, "code": 500}, 502),
        ({"message": "no free blocks", "type": "server_error", "code": "overloaded"}, 502),
    ],
    ids=["code-400", "code-500", "code-string"],
)
def test_error_event_before_the_first_byte_keeps_its_status_and_object(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], error: dict[str, Any], status: int
) -> None:
    async def fail(body: dict[str, Any], request: Request) -> Response:
        return sse("data: " + json.dumps({"error": error}) + "\n\n", "data: [DONE]\n\n")

    up.handler = fail
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"fails first {status} {error['code']}", stream=True))
    assert r.status_code == status, r.text
    assert r.json() == {"error": error}  # the upstream's object, not its Python repr
    assert entries(gw, tenant[0]) == 0


def test_error_event_after_bytes_is_forwarded_unchanged_and_ends_the_stream(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    event = json.dumps({"error": {"message": "engine died", "type": "server_error", "code": 500}})

    async def fail(body: dict[str, Any], request: Request) -> Response:
        role = chunk({"role": "assistant", "content": ""})
        return sse(role, chunk({"content": "Partial answer"}), f"data: {event}\n\n")

    up.handler = fail
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("fails midway", stream=True))
    assert r.status_code == 200
    events = [e for e in r.text.split("\n\n") if e.strip()]
    assert events[-2:] == [f"data: {event}", "data: [DONE]"]
    assert "Partial answer" in events[1]
    assert entries(gw, tenant[0]) == 0


def test_relayed_errors_are_still_openai_shaped_when_the_upstream_body_is_not(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    async def bare(body: dict[str, Any], request: Request) -> Response:
        return Response("slow down", status_code=429, headers={"retry-after": "2"})

    up.handler = bare
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("bare 429"))
    assert r.status_code == 429
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert r.headers["retry-after"] == "2"


# ----------------------------------------------------------------- odd usage counts


@pytest.mark.parametrize(
    "odd",
    [{"prompt_tokens": -5, "completion_tokens": 2}, {"prompt_tokens": "many"}, ["not", "a", "map"]],
    ids=["negative", "text", "list"],
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
            return sse(chunk({"role": "assistant", "content": "Ok."}), chunk({}, "stop"))
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


# ----------------------------------------------------------------- other 5xx

SERVER_ERROR = {
    "error": {"message": "CUDA out of memory", "type": "server_error", "param": None, "code": None}
}
SECRET = "private-user-text"  # in a non-JSON error body: the client's, never a log's


@pytest.mark.parametrize(("status", "relayed"), [(500, 500), (502, 502), (504, 504), (501, 502)])
def test_other_5xx_keep_the_upstreams_body_and_headers(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], status: int, relayed: int
) -> None:
    async def fail(body: dict[str, Any], request: Request) -> Response:
        headers = {"x-ratelimit-remaining-requests": "9", "x-request-id": "req_up_5xx"}
        return JSONResponse(SERVER_ERROR, status_code=status, headers=headers)

    up.handler = fail
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"fails with {status}"))
    assert r.status_code == relayed, r.text
    assert r.json() == SERVER_ERROR  # before: the gateway's own 502, the body lost
    assert r.headers["x-ratelimit-remaining-requests"] == "9"
    assert r.headers["x-upstream-request-id"] == "req_up_5xx"


def test_a_non_json_5xx_body_goes_to_the_client_only(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    async def fail(body: dict[str, Any], request: Request) -> Response:
        return Response(f"<html>failed on {SECRET}</html>", status_code=500)

    up.handler = fail
    with caplog.at_level("DEBUG"), gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("a plain-text failure"))
    assert r.status_code == 500
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and SECRET in err["message"]
    assert SECRET not in caplog.text and all(SECRET not in v for v in r.headers.values())

    async def main() -> None:  # an exception recorded on a trace span is its str()
        pool = EnginePool.from_urls([up.url], model=MODEL, dialect_name="vllm")
        try:
            with pytest.raises(UpstreamStatusError) as caught:
                async for _ in pool.stream(_pool_request("a plain-text failure")):
                    pass
        finally:
            await pool.aclose()
        assert SECRET in caught.value.body()["error"]["message"]
        assert SECRET not in str(caught.value) and SECRET not in repr(caught.value)

    asyncio.run(main())


def test_a_chunk_with_a_null_error_is_no_error(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    def null_error(delta: dict[str, Any], finish: str | None = None) -> str:
        payload = json.loads(chunk(delta, finish).removeprefix("data: "))
        return "data: " + json.dumps(payload | {"error": None}) + "\n\n"

    async def stream(body: dict[str, Any], request: Request) -> Response:
        role = null_error({"role": "assistant", "content": ""})
        return sse(role, null_error({"content": "Fine."}), null_error({}, "stop"))

    up.handler = stream
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("null error field", stream=True))
    assert r.status_code == 200, r.text
    chunks = sse_payloads(r.text)
    assert chunks[1]["choices"][0]["delta"]["content"] == "Fine."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


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
            whole = [e async for e in pool.stream(_pool_request("a long answer"))]
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


def test_models_retrieve_embeddings_and_responses(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    received: list[dict[str, Any]] = []
    vectors = {"object": "list", "data": [{"object": "embedding", "index": 0,
               "embedding": [0.1, -0.2]}], "model": MODEL,
               "usage": {"prompt_tokens": 2, "total_tokens": 2}}  # fmt: skip

    async def embed(body: dict[str, Any], request: Request) -> Response:
        received.append(body)
        if body.get("input") == "refuse":
            error = {"message": "bad input", "type": "invalid_request_error", "param": "input"}
            return JSONResponse({"error": error | {"code": None}}, status_code=400)
        return JSONResponse(vectors, headers={"x-ratelimit-remaining-tokens": "99"})

    up.handler = embed
    sdk = gw.openai(tenant[1])
    assert sdk.models.retrieve(MODEL).id == MODEL  # the SDK's models.retrieve
    with gw.http(tenant[1]) as http:
        unknown = http.get("/v1/models/<b>secret-model</b>")
        body = {"model": MODEL, "input": "hello", "encoding_format": "float"}
        embedded = http.post("/v1/embeddings", json=body)
        refused = http.post("/v1/embeddings", json={"model": MODEL, "input": "refuse"})
        responses = http.post("/v1/responses", json={"model": MODEL, "input": "hi"})
    err = unknown.json()["error"]
    assert unknown.status_code == 404 and err["code"] == "model_not_found"
    assert "secret-model" not in unknown.text  # the client's text is not quoted
    assert embedded.status_code == 200, embedded.text
    assert embedded.json() == vectors and received[0] == body  # passed through, unchanged
    assert embedded.headers["x-ratelimit-remaining-tokens"] == "99"
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "input"
    assert responses.status_code == 404
    assert responses.json()["error"]["code"] == "unsupported_endpoint"
    anonymous = httpx.post(gw.url + "/v1/embeddings", json=body)
    assert anonymous.status_code == 401 and len(received) == 2
