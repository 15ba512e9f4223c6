"""bench/http_lean.py against a real uvicorn server: the load generator must read what
the gateway sends (Content-Length and chunked bodies, any status) over one kept-alive
connection, and reconnect after the server closes it."""

from __future__ import annotations

import asyncio
import json

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bench.http_lean import LeanConnection, LeanHttpError
from tests.live_server import serving

CONNECTIONS: set[tuple[str, int]] = set()


async def echo(request: Request) -> Response:
    client = request.client
    assert client is not None
    CONNECTIONS.add((client.host, client.port))
    body = await request.json()
    headers = {"x-seen-auth": request.headers.get("authorization", "")}
    return JSONResponse({"echo": body}, status_code=int(body.get("status", 200)), headers=headers)


async def chunks(request: Request) -> Response:
    async def parts():
        for i in range(5):
            yield f"part{i};".encode()

    return StreamingResponse(parts(), media_type="text/plain")


async def closing(request: Request) -> Response:
    return Response(b"bye", headers={"connection": "close"})


APP = Starlette(
    routes=[
        Route("/echo", echo, methods=["POST"]),
        Route("/chunks", chunks, methods=["GET"]),
        Route("/close", closing, methods=["GET"]),
    ]
)


@pytest.fixture(scope="module")
def url() -> object:
    with serving(APP) as base:
        yield base


def test_requests_share_one_kept_alive_connection(url: str) -> None:
    async def run() -> list[tuple[int, dict, str]]:
        headers = {"Authorization": "Bearer k", "Content-Type": "application/json"}
        conn = LeanConnection(url, headers)
        out = []
        for i in range(5):
            body = json.dumps({"i": i, "status": 200 if i != 3 else 404}).encode()
            r = await conn.send(conn.request_bytes("POST", "/echo", body))
            out.append((r.status, json.loads(r.body), r.headers["x-seen-auth"]))
        await conn.close()
        return out

    CONNECTIONS.clear()
    out = asyncio.run(run())
    assert [s for s, _, _ in out] == [200, 200, 200, 404, 200]  # any status passes through
    assert [b["echo"]["i"] for _, b, _ in out] == list(range(5))
    assert {auth for _, _, auth in out} == {"Bearer k"}
    assert len(CONNECTIONS) == 1  # keep-alive: one TCP connection for all five


def test_chunked_bodies_are_reassembled(url: str) -> None:
    async def run() -> bytes:
        conn = LeanConnection(url)
        r = await conn.send(conn.request_bytes("GET", "/chunks"))
        again = await conn.send(conn.request_bytes("GET", "/chunks"))  # stream fully drained
        await conn.close()
        assert r.headers.get("transfer-encoding") == "chunked" and again.body == r.body
        return r.body

    assert asyncio.run(run()) == b"".join(f"part{i};".encode() for i in range(5))


def test_a_closed_connection_is_reopened(url: str) -> None:
    async def run() -> tuple[bytes, int]:
        conn = LeanConnection(url, {"Content-Type": "application/json"})
        bye = await conn.send(conn.request_bytes("GET", "/close"))
        r = await conn.send(conn.request_bytes("POST", "/echo", b'{"i": 1}'))
        await conn.close()
        return bye.body, r.status

    assert asyncio.run(run()) == (b"bye", 200)


def test_a_dead_server_raises_and_only_http_urls_are_taken() -> None:
    with pytest.raises(ValueError):
        LeanConnection("https://example.com")

    async def run() -> None:
        conn = LeanConnection("http://127.0.0.1:9")  # discard port: nothing listens
        await conn.send(conn.request_bytes("GET", "/"))

    with pytest.raises((OSError, LeanHttpError)):
        asyncio.run(run())
