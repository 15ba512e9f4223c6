"""The gateway's connections to an HTTP upstream (gateway/proxy/http_upstream.py).

One client serves every tenant, so it must hold no state a tenant could leave behind
(cookies), must not cap concurrency below what the upstream serves (httpx's default
pool of 100), must keep ``/ready`` answering while requests fill the pool, and must
never send a request twice when the upstream may already have run it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from gateway.errors import ServiceUnavailableError, UpstreamError
from gateway.proxy.http_upstream import HttpUpstream
from tests.gateway.conftest import Gateway
from tests.gateway.proxy.relay.support import CHAT, Scripted, answer, ask, chunk, pool_request


def test_a_cookie_one_tenants_answer_sets_never_goes_out_with_another_tenants_request(
    gw: Gateway, up: Scripted
) -> None:
    seen: list[str | None] = []

    async def handler(body: dict[str, Any], request: Request) -> Response:
        seen.append(request.headers.get("cookie"))
        response = JSONResponse(answer("Hello"))
        response.set_cookie("sess", "tenant-a-session")
        return response

    up.handler = handler
    # The control: a client that keeps cookies sends it back, so the test can fail.
    with httpx.Client(base_url=up.url) as plain:
        plain.post(CHAT, json=ask("first"))
        plain.post(CHAT, json=ask("second"))
    assert seen == [None, "sess=tenant-a-session"]
    seen.clear()
    for prefix in ("cookie-a", "cookie-b"):
        with gw.http(gw.tenant(prefix)[1]) as http:
            r = http.post(CHAT, json=ask(f"Who set a cookie? ({prefix})"))
        assert r.status_code == 200, r.text
        assert "set-cookie" not in r.headers  # never passed to clients either
    assert seen == [None, None]


def long_streams(up: Scripted) -> None:
    """Streams of 4 s, a chunk every 0.5 s: well inside a 2.5 s read timeout each (1 s
    left 0.5 s of margin, and 150 streams on two loaded cores stalled past it once,
    session 44), and longer than the 2.5 s a request waits for a pooled connection."""

    async def handler(body: dict[str, Any], request: Request) -> Response:
        async def parts() -> AsyncIterator[str]:
            yield chunk({"role": "assistant", "content": ""})
            for _ in range(8):
                await asyncio.sleep(0.5)
                yield chunk({"content": "."})
            yield chunk({}, "stop") + "data: [DONE]\n\n"

        return StreamingResponse(parts(), media_type="text/event-stream")

    up.handler = handler


async def _many(upstream: HttpUpstream, n: int) -> tuple[list[Any], bool]:
    """``n`` concurrent streams, and whether ``/ready`` said ready while they ran."""

    async def one(i: int) -> Any:
        request = pool_request(f"concurrent {i}")
        request.body["stream"] = True
        try:
            return [e async for e in upstream.stream(request)]
        except Exception as exc:  # the outcome is what the test reads
            return exc

    tasks = [asyncio.ensure_future(one(i)) for i in range(n)]
    await asyncio.sleep(0.3)  # all of them in flight
    ready = await upstream.is_ready()
    return await asyncio.gather(*tasks), ready


def test_more_than_a_hundred_concurrent_streams_reach_the_upstream_and_ready_holds(
    up: Scripted,
) -> None:
    long_streams(up)

    async def run(max_connections: int) -> tuple[list[Any], bool]:
        upstream = HttpUpstream(
            up.url, read_timeout=2.5, dialect_name="vllm", max_connections=max_connections
        )
        try:
            return await _many(upstream, 150)
        finally:
            await upstream.aclose()

    results, ready = asyncio.run(run(1000))
    assert ready
    assert [r for r in results if isinstance(r, BaseException)] == []
    # The control: httpx's default pool of 100. The other 50 wait for a connection past
    # the timeout, and say so as a 503 (not a 504 from an upstream that never saw them).
    results, ready = asyncio.run(run(100))
    failed = [r for r in results if isinstance(r, BaseException)]
    busy = [r for r in failed if isinstance(r, ServiceUnavailableError)]
    assert len(failed) == len(busy) == 50
    assert busy[0].code == "upstream_connections_busy"
    assert ready  # the readiness check has its own pool


async def _drop_after_reading(reads: list[int]) -> tuple[asyncio.AbstractServer, str]:
    """An upstream that reads each request whole, then closes without an answer."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        reads.append(length)
        await asyncio.sleep(0.1)  # it started working on it
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_request_the_upstream_read_and_dropped_is_not_sent_again(stream: bool) -> None:
    reads: list[int] = []

    async def run() -> BaseException | None:
        server, url = await _drop_after_reading(reads)
        upstream = HttpUpstream(url, retries=2, dialect_name="vllm")
        request = pool_request("Run me once")
        request.body["stream"] = stream
        try:
            events: AsyncIterator[Any] = upstream.stream(request)
            async for _ in events:
                pass
        except UpstreamError as exc:
            return exc
        finally:
            await upstream.aclose()
            server.close()
        return None

    err = asyncio.run(run())
    assert isinstance(err, UpstreamError) and err.status == 502
    assert len(reads) == 1  # three copies before: it may have run, so never again


def test_an_unreachable_upstream_is_still_a_502_unreachable() -> None:
    async def run() -> UpstreamError:
        upstream = HttpUpstream("http://127.0.0.1:9", retries=2, dialect_name="vllm")
        try:
            async for _ in upstream.stream(pool_request("nobody listens")):
                pass
        except UpstreamError as exc:
            return exc
        finally:
            await upstream.aclose()
        raise AssertionError("no error")

    err = asyncio.run(run())
    assert err.code == "upstream_unreachable"
    assert isinstance(err.__cause__, httpx.ConnectError)
