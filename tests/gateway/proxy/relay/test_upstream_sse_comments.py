"""SSE comments, [DONE] and the backfill through an HTTP upstream (gateway/proxy/relay.py):
keep-alive comments reach the client while the upstream queues, an error after a
comment is an event of the started stream, a stream without a finish reason is not
stored, a slow backfill does not hold back [DONE], and a UTF-8 comment arrives as it
came.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from tests.gateway.conftest import Gateway, sse_payloads
from tests.gateway.proxy.relay.sse_bytes import DONE, ROLE, STOP, USAGE, answers, event
from tests.gateway.proxy.relay.support import CHAT, Scripted, ask


@pytest.fixture
def key(gw: Gateway) -> str:
    return gw.tenant("sse")[1]


# ----------------------------------------------------------------- comments, [DONE], backfill


def slow_stream(up: Scripted, gaps: int, ping: bool, pieces: tuple[bytes, ...]) -> None:
    """An upstream that waits ``gaps`` × 0.4 s before its first chunk (a queue, a long
    prefill), sending ``: ping`` each time when ``ping``."""

    async def handler(body: dict[str, Any], request: Request) -> Response:
        async def parts() -> AsyncIterator[bytes]:
            for _ in range(gaps):
                if ping:
                    yield b": ping\n\n"
                await asyncio.sleep(0.4)
            for piece in pieces:
                yield piece

        return StreamingResponse(parts(), media_type="text/event-stream")

    up.handler = handler


def test_keep_alive_comments_reach_the_client_while_the_upstream_queues(
    gw: Gateway, up: Scripted, key: str
) -> None:
    """2 s before the first token, a ping every 0.4 s: a client whose idle timeout is
    1 s keeps working through the gateway, as it would directly; the answer is still
    stored. Without the pings the same client times out (the control)."""
    pieces = (ROLE, event({"content": "Pinged answer"}), STOP, USAGE, DONE)
    slow_stream(up, 5, True, pieces)
    question = ask("Which upstreams send keep-alive pings?", stream=True)
    idle = httpx.Timeout(10.0, read=1.0)
    with gw.http(key) as http:
        r = http.post(CHAT, json=question, timeout=idle)
        assert r.status_code == 200, r.text
        assert r.text.startswith(": ping\n\n")  # the status line went out with the first
        chunks = sse_payloads(r.text)
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == (
            "Pinged answer"
        )
        again = http.post(CHAT, json=question | {"stream": False})
        assert again.headers["x-cachegate-cache"] == "semantic-hit"
        slow_stream(up, 5, False, pieces)
        with pytest.raises(httpx.ReadTimeout):
            http.post(CHAT, json=ask("Which upstreams never ping?", stream=True), timeout=idle)


def test_an_error_after_a_comment_is_an_event_of_the_started_stream(
    gw: Gateway, up: Scripted, key: str
) -> None:
    error = {"error": {"message": "overloaded", "type": "server_error", "param": None, "code": 503}}
    answers(up, b": ping\n\n", b"data: " + json.dumps(error).encode() + b"\n\n")
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask("pinged, then refused", stream=True))
    assert r.status_code == 200  # the upstream's status, sent with its comment
    assert sse_payloads(r.text) == [error]


def test_a_whole_stream_without_a_finish_reason_ends_normally_and_is_not_stored(
    gw: Gateway, up: Scripted, key: str
) -> None:
    question = "What ends a stream without saying why?"
    answers(up, ROLE, event({"content": "No reason given"}), DONE)
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask(question, stream=True))
        chunks = sse_payloads(r.text)
        assert all("error" not in c for c in chunks), chunks
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == (
            "No reason given"
        )
        answers(up, ROLE, event({"content": "Stored this time"}), STOP, USAGE, DONE)
        again = http.post(CHAT, json=ask(question, stream=True))
        assert again.status_code == 200, again.text
        assert again.headers["x-cachegate-cache"] == "miss"  # nothing was stored
        # The control: cut off before [DONE], the same stream ends with an error event.
        answers(up, ROLE, event({"content": "Cut off"}))
        cut = http.post(CHAT, json=ask("A stream cut before its end?", stream=True))
    assert "error" in sse_payloads(cut.text)[-1]


def test_a_slow_backfill_does_not_hold_back_the_streams_done(
    gw: Gateway, up: Scripted, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that hangs (a locked database, until its timeout) delays nothing the
    client waits for: [DONE] is out before the backfill runs."""
    pipeline = gw.state.pipeline
    backfill = pipeline.backfill

    async def slow(*args: Any, **kwargs: Any) -> str:
        await asyncio.sleep(3.0)
        return await backfill(*args, **kwargs)

    monkeypatch.setattr(pipeline, "backfill", slow)
    answers(up, ROLE, event({"content": "Quick"}), STOP, USAGE, DONE)
    with gw.http(key) as http:
        started = time.monotonic()
        with http.stream("POST", CHAT, json=ask("A slow store?", stream=True)) as r:
            lines = []
            for line in r.iter_lines():
                lines.append(line)
                if line == "data: [DONE]":
                    break
            waited = time.monotonic() - started
    assert lines[-1] == "data: [DONE]"
    assert waited < 2.0, waited


def test_a_utf8_comment_reaches_the_client_as_it_came(gw: Gateway, up: Scripted, key: str) -> None:
    """Read as ASCII with replacement, ": queued — position 3" reached the client as
    ": queued ��� position 3" (a review, session 45); bytes that are not UTF-8 are
    dropped (the control that the rule still holds), never mended."""
    answers(
        up,
        ": queued — position 3\n\n".encode(),
        b": bad \xff\xfe bytes\n\n",
        ROLE,
        event({"content": "Queued answer"}),
        STOP,
        DONE,
    )
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask("Does a queued comment pass?", stream=True))
    assert r.status_code == 200, r.text
    assert r.text.startswith(": queued — position 3\n\n"), r.text[:80]
    assert "\ufffd" not in r.text and "bad" not in r.text
