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
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from gateway.proxy.engine_pool import EnginePool
from gateway.proxy.upstream import UpstreamStatusError
from tests.gateway.conftest import Gateway, sse_payloads
from tests.gateway.proxy.relay.support import (
    CHAT,
    DONE,
    MODEL,
    OVERLOADED,
    RATE_LIMITED,
    Scripted,
    answer,
    ask,
    chunk,
    entries,
    pool_request,
    sse,
)
from tests.live_server import serving

# The upstream's x-ratelimit-* pass to clients only under this setting (they count the
# gateway's one account: gateway/proxy/cache_counts.py); what is tested here is how
# they pass and mix with the tenant's own, so it is on.
GATEWAY_SETTINGS = {"upstream_cached_tokens": "pass"}

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
                    for r in map(pool_request, (f"q{i}" for i in range(100)))
                    if pool.ring.preference(pool.key(r))[0] == limited
                )
                for _ in range(3):
                    events = [e async for e in pool.stream(req)]
                    assert events[-1].body == answer("fine")  # type: ignore[union-attr]
                # Asked every time (not marked down), never counted as failed.
                assert calls == {"limited": 3, "ok": 3}
                assert all(s["is_up"] and s["failures"] == 0 for s in pool.replica_states())
                with pytest.raises(UpstreamStatusError) as caught:
                    async for _ in both.stream(pool_request("q")):
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
                async for _ in pool.stream(pool_request("a plain-text failure")):
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
        return sse(role, null_error({"content": "Fine."}), null_error({}, "stop"), DONE)

    up.handler = stream
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("null error field", stream=True))
    assert r.status_code == 200, r.text
    chunks = sse_payloads(r.text)
    assert chunks[1]["choices"][0]["delta"]["content"] == "Fine."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
