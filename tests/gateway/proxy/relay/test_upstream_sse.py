"""How the gateway reads an HTTP upstream's SSE stream and bodies (gateway/proxy/relay.py,
gateway/proxy/upstream_read.py).

SSE lines end at CR, LF or CRLF only: U+2028, U+2029 and U+0085, which JSON carries
unescaped (vLLM, our engine), stay inside their chunk, forwarded byte for byte and
backfilled. An upstream cannot make the gateway hold more than the configured body
and event sizes (small here), and JSON nested past the parser's depth is a clean
upstream error, never a 500. Comments, [DONE] and the backfill:
test_upstream_sse_comments.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from gateway.app import Components
from semantic import Embedder
from tests.gateway.conftest import (
    Gateway,
    assert_openai_error,
    gateway_settings,
    running_gateway,
    sse_payloads,
)
from tests.gateway.proxy.relay.sse_bytes import DONE, ROLE, STOP, USAGE, answers, event, sse
from tests.gateway.proxy.relay.support import CHAT, Scripted, answer, ask

MAX_BODY = 16 * 1024
MAX_EVENT = 8 * 1024
TOO_LARGE = "the upstream's response is too large"
SECRET = "private-user-text"  # in every oversized answer: it must never reach an error
DEEP = "[" * 5000 + "]" * 5000  # past the JSON parser's nesting depth


# The scripted upstream `up` is relay/conftest.py's; this gateway bounds what it holds
# small, so it replaces the conftest's `gw`.
@pytest.fixture(scope="module")
def gw(
    up: Scripted, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("sse")
    settings = gateway_settings(
        data_dir,
        upstream_url=up.url,
        upstream_max_body_bytes=MAX_BODY,
        upstream_max_event_bytes=MAX_EVENT,
    )
    with running_gateway(settings, Components(embedder=embedder)) as gateway:
        yield gateway


@pytest.fixture
def key(gw: Gateway) -> str:
    return gw.tenant("sse")[1]


# ----------------------------------------------------------------- line ends


def test_unicode_line_separators_stay_in_their_chunk_and_are_backfilled(
    gw: Gateway, up: Scripted, key: str
) -> None:
    pieces = ["Line one\u2028", "line two\u2029", "three\x85end."]
    body = [ROLE, *(event({"content": p}) for p in pieces), STOP, DONE]
    # The usage chunk the gateway asked vLLM for (an answer without usage is not
    # stored), taken out again: the client did not ask for it.
    answers(up, *body[:-1], USAGE, DONE)
    question = "Which characters separate the lines of this answer?"
    with gw.http(key) as http:
        first = http.post(CHAT, json=ask(question, stream=True))
        again = http.post(CHAT, json=ask(question))
    assert first.status_code == 200, first.text
    assert first.content == b"".join(body)  # every chunk as the upstream wrote it
    assert again.headers["x-cachegate-cache"] == "semantic-hit"
    assert again.json()["choices"][0]["message"]["content"] == "".join(pieces)


def test_crlf_cr_comments_and_multiline_data_are_read_as_sse(
    gw: Gateway, up: Scripted, key: str
) -> None:
    split = event({"content": " world"}).decode().replace(',"delta"', ',\ndata: "delta"', 1)
    answers(
        up,
        b": keep-alive\r\n\r\n",
        ROLE.replace(b"\n", b"\r\n"),
        event({"content": "Hello"}).replace(b"\n", b"\r"),
        split.encode(),  # one event in two data: lines, joined with LF
        STOP,
        b"data: [DONE]\r\n\r\n",
    )
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask("How do SSE lines end?", stream=True))
    assert r.status_code == 200, r.text
    chunks = sse_payloads(r.text)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Hello world"


def test_chunks_separated_by_one_line_end_still_stream(gw: Gateway, up: Scripted, key: str) -> None:
    # Against the SSE spec (an event ends at a blank line), some OpenAI-compatible
    # servers and proxies end each chunk with one LF: it worked before the gateway read
    # SSE as the spec says, and a working upstream must keep working.
    single = [ROLE, event({"content": "Hello"}), event({"content": " there"}), STOP, DONE]
    answers(up, *(part.replace(b"\n\n", b"\n") for part in single))
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask("Do single line ends still stream?", stream=True))
    assert r.status_code == 200, r.text
    chunks = sse_payloads(r.text)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Hello there"


# ----------------------------------------------------------------- size limits


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("size", [MAX_BODY // 2, MAX_BODY * 4], ids=["under", "over"])
def test_a_body_over_the_limit_is_a_502_without_its_text(
    gw: Gateway, up: Scripted, key: str, framing: str, size: int
) -> None:
    raw = json.dumps(answer(SECRET + "a" * size)).encode()

    async def big(body: dict[str, Any], request: Request) -> Response:
        if framing == "content-length":
            return Response(raw, media_type="application/json")

        async def pieces() -> AsyncIterator[bytes]:
            for i in range(0, len(raw), 1024):
                yield raw[i : i + 1024]

        return StreamingResponse(pieces(), media_type="application/json")

    up.handler = big
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask(f"a big answer {framing} {size}"))
    if size < MAX_BODY:
        assert r.status_code == 200, r.text
        assert r.content == raw
        return
    assert r.status_code == 502, r.text
    assert r.json()["error"]["message"] == TOO_LARGE
    assert r.json()["error"]["type"] == "upstream_error"
    assert SECRET not in r.text


@pytest.mark.parametrize("where", ["first", "mid-stream"])
@pytest.mark.parametrize("shape", ["line-under", "line-over", "lines-over"])
def test_an_event_over_the_limit_ends_the_answer_as_an_upstream_error(
    gw: Gateway, up: Scripted, key: str, where: str, shape: str
) -> None:
    if shape == "lines-over":  # every line under the limit, the event over it
        line = b"data: " + b" " * (MAX_EVENT // 2) + b"\n"
        big = line * 3 + event({"content": SECRET})
    else:
        big = event({"content": SECRET + "a" * (MAX_EVENT * 2 if shape == "line-over" else 1000)})
    answers(up, *([] if where == "first" else [ROLE]), big, STOP, DONE)
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask(f"a big chunk {where} {shape}", stream=True))
    if shape == "line-under":
        assert r.status_code == 200, r.text
        assert sse_payloads(r.text)[-1]["choices"][0]["finish_reason"] == "stop"
        return
    assert SECRET not in r.text
    if where == "first":
        assert r.status_code == 502, r.text
        assert r.json()["error"]["message"] == TOO_LARGE
        return
    assert r.status_code == 200  # bytes went out: the status cannot change
    events = sse_payloads(r.text)
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[-1]["error"]["message"] == TOO_LARGE


def test_a_line_that_never_ends_stops_the_reading(gw: Gateway, up: Scripted, key: str) -> None:
    sent = {"pieces": 0}

    async def endless(body: dict[str, Any], request: Request) -> Response:
        async def pieces() -> AsyncIterator[bytes]:
            yield ROLE
            yield b'data: {"choices":[{"index":0,"delta":{"content":"'
            for _ in range(2048):  # 2 MiB, never a line end
                sent["pieces"] += 1
                yield b"a" * 1024
                await asyncio.sleep(0.001)

        return StreamingResponse(pieces(), media_type="text/event-stream")

    up.handler = endless
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask("an endless line", stream=True))
    assert sse_payloads(r.text)[-1]["error"]["message"] == TOO_LARGE
    assert sent["pieces"] < 1024  # the gateway hung up, it did not read on


def test_an_error_body_is_read_only_up_to_a_small_cap(gw: Gateway, up: Scripted, key: str) -> None:
    huge = {"error": {"message": "bad " + "a" * 100_000, "type": "invalid_request_error"}}

    async def refuse(body: dict[str, Any], request: Request) -> Response:
        return JSONResponse(huge, status_code=400)

    up.handler = refuse
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask("refused at length"))
    assert_openai_error(r, 400)  # the status kept, the message its start
    assert r.json() != huge  # not relayed as the upstream's object: not read whole
    assert len(r.content) < 1024


# ----------------------------------------------------------------- nesting


def nested(value: dict[str, Any], depth: int) -> str:
    """``value`` as JSON with an extra field nested ``depth`` lists deep."""
    return json.dumps(value)[:-1] + ', "x": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize("where", ["body", "first-chunk", "mid-stream", "error-body"])
@pytest.mark.parametrize("depth", [20, 500, 5000], ids=["control", "deep", "past-the-parser"])
def test_json_nested_too_deeply_is_an_upstream_error_not_a_500(
    gw: Gateway, up: Scripted, key: str, where: str, depth: int
) -> None:
    refusal = {"error": {"message": "no", "type": "invalid_request_error"}}

    async def handler(body: dict[str, Any], request: Request) -> Response:
        if where == "body":
            return Response(nested(answer("Fine."), depth), media_type="application/json")
        if where == "error-body":
            return Response(nested(refusal, depth), 400, media_type="application/json")
        chunk = json.loads(event({"content": "Fine."})[len(b"data: ") :])
        deep = f"data: {nested(chunk, depth)}\n\n".encode()
        return sse(*([deep] if where == "first-chunk" else [ROLE, deep]), STOP, DONE)

    up.handler = handler
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask(f"nested {where} {depth}", stream=where != "body"))
    control = depth < 100
    if where == "error-body":
        assert r.status_code == 400, r.text
        assert (r.json()["error"]["message"] == "no") is control  # else not JSON: its start
    elif where == "body":
        assert r.status_code == (200 if control else 502), r.text
    elif where == "first-chunk" and not control:
        assert r.status_code == 502, r.text
        assert r.json()["error"]["type"] == "upstream_error"
    else:
        assert r.status_code == 200, r.text
        last = sse_payloads(r.text)[-1]
        assert ("error" not in last) is control, last
