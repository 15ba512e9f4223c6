"""The gateway never sends a request on a connection to the upstream that has been
idle as long as the upstream keeps one (``upstream_keepalive_seconds``, 2 s: vLLM's
and SGLang's uvicorn close an idle connection after 5 s, which was httpx's default
reuse too). A request sent on a connection the upstream is closing at that moment
fails after it was sent, is not retried (it may have run), and the client got a 502
from a working upstream.

The upstream here is a real socket server that, like one whose keep-alive timer fires
as the request arrives, closes a connection idle for a second when a request comes on
it, unanswered. Positive control: a client that reuses connections idle that long
(httpx's 5 s) gets exactly that failure."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from gateway.errors import UpstreamError
from gateway.proxy.http_upstream import HttpUpstream
from gateway.settings import Settings

IDLE_CLOSE = 1.0  # the upstream's keep-alive, scaled down from 5 s


def _serve(conn: socket.socket) -> None:
    conn.settimeout(10)
    last = time.monotonic()
    buffer = b""
    with conn:
        while True:
            try:
                chunk = conn.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            if not buffer and time.monotonic() - last >= IDLE_CLOSE:
                return  # the keep-alive timer fired: closed, nothing answered
            buffer += chunk
            head, sep, rest = buffer.partition(b"\r\n\r\n")
            if not sep:
                continue
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) < length:
                continue
            buffer = rest[length:]
            body = json.dumps({"object": "list", "data": []}).encode()
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            last = time.monotonic()


@pytest.fixture
def upstream_url() -> Iterator[str]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=_serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    server.close()


def two_requests_a_keep_alive_apart(url: str, keepalive_seconds: float) -> list[object]:
    async def run() -> list[object]:
        up = HttpUpstream(url, dialect_name="vllm", retries=0, keepalive_seconds=keepalive_seconds)
        out: list[object] = []
        try:
            for i in range(2):
                if i:
                    await asyncio.sleep(IDLE_CLOSE + 0.3)
                try:
                    out.append((await up.forward("/v1/embeddings", {"input": "x"}, f"r{i}"))[0])
                except UpstreamError as exc:
                    out.append(exc.code)
        finally:
            await up.aclose()
        return out

    return asyncio.run(run())


def test_a_connection_idle_past_the_keep_alive_is_not_reused(upstream_url: str) -> None:
    assert two_requests_a_keep_alive_apart(upstream_url, keepalive_seconds=0.5) == [200, 200]


def test_the_control_reusing_it_fails_after_sending(upstream_url: str) -> None:
    found = two_requests_a_keep_alive_apart(upstream_url, keepalive_seconds=5.0)
    assert found[0] == 200 and found[1] != 200, found


def test_the_default_reuse_is_below_common_upstream_keep_alives() -> None:
    settings = Settings(_env_file=None)
    assert settings.upstream_keepalive_seconds < 5.0  # vLLM's and SGLang's uvicorn
    assert settings.keep_alive_seconds > 60  # AWS's and GCP's balancers' idle timeout
