"""A client that trickles its request body is answered 408 and let go, over real sockets.

uvicorn puts no deadline on a request body: a client that declared 500 bytes and sent
ten held its connection and a task until it chose to leave, and a few hundred such
clients hold every connection the gateway has. ``CACHEGATE_REQUEST_BODY_TIMEOUT``
(``protocol/http.py`` ``read_body``) now bounds the whole body's arrival on the proxy
and admin routes. Controls: a body sent in pieces inside the deadline is answered as
ever, and the gateway serves other clients while one trickles.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from gateway.app import Components
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway

TIMEOUT = 1.0  # CACHEGATE_REQUEST_BODY_TIMEOUT of the gateway under test
ADMIN_TOKEN = "admin-body-timeout"
SECRET = "zebra-trickle"  # client text: never in an answer


@pytest.fixture(scope="module")
def gw(tiny_llama: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=128), loaded=tiny_llama)
    settings = gateway_settings(
        tmp_path_factory.mktemp("body-timeout"),
        semantic_enabled=False,
        request_body_timeout=TIMEOUT,
        admin_token=ADMIN_TOKEN,
    )
    with running_gateway(settings, Components(engine=engine)) as gateway:
        yield gateway


def connect(gw: Gateway) -> socket.socket:
    url = urlsplit(gw.url)
    sock = socket.create_connection((url.hostname or "127.0.0.1", url.port or 80), timeout=10)
    return sock


def head(path: str, token: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes, bool]:
    """(status, headers, body, closed): reads until the server closes or 10 s pass."""
    data = b""
    closed = False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            closed = True
            break
        data += chunk
        if b"\r\n\r\n" in data:
            top, _, rest = data.partition(b"\r\n\r\n")
            fields = dict(line.split(": ", 1) for line in top.decode("latin-1").split("\r\n")[1:])
            headers = {k.lower(): v for k, v in fields.items()}
            if len(rest) >= int(headers.get("content-length", "0")):
                if headers.get("connection") != "close":
                    break
                sock.settimeout(3)  # then: does the server close the connection?
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
    return status, headers, rest, closed


def completion(gw: Gateway) -> bytes:
    body = {"model": gw.model, "prompt": f"hello {SECRET}", "max_tokens": 2}
    return json.dumps(body).encode()


def test_a_trickled_completions_body_is_a_408_and_its_connection_is_closed(gw: Gateway) -> None:
    _, key = gw.tenant()
    body = completion(gw)
    with connect(gw) as sock:
        started = time.monotonic()
        sock.sendall(head("/v1/completions", key, len(body)) + body[:10])
        status, headers, raw, closed = read_response(sock)
        waited = time.monotonic() - started
    assert status == 408, raw
    error = json.loads(raw)["error"]
    assert error["code"] == "request_timeout"
    assert error["type"] == "invalid_request_error"
    assert SECRET not in raw.decode()
    assert headers.get("connection") == "close"
    assert closed  # the rest of the body would have been read as the next request
    assert TIMEOUT <= waited < TIMEOUT + 5


def test_a_body_sent_in_pieces_inside_the_deadline_is_answered(gw: Gateway) -> None:
    _, key = gw.tenant()
    body = completion(gw)
    with connect(gw) as sock:
        sock.sendall(head("/v1/completions", key, len(body)) + body[:10])
        time.sleep(TIMEOUT / 4)
        sock.sendall(body[10:40])
        time.sleep(TIMEOUT / 4)
        sock.sendall(body[40:])
        status, _, raw, _ = read_response(sock)
    assert status == 200, raw
    assert json.loads(raw)["object"] == "text_completion"


def test_other_clients_are_served_while_one_trickles(gw: Gateway) -> None:
    _, key = gw.tenant()
    body = completion(gw)
    with connect(gw) as slow:
        slow.sendall(head("/v1/completions", key, len(body)) + body[:5])
        with gw.http(key) as client:
            r = client.post("/v1/completions", content=body)
        assert r.status_code == 200, r.text
        status, _, _, _ = read_response(slow)
    assert status == 408


def test_a_trickled_admin_body_is_a_408(gw: Gateway) -> None:
    body = json.dumps({"tenant_id": "trickle-admin", "name": SECRET}).encode()
    with connect(gw) as sock:
        sock.sendall(head("/admin/tenants", ADMIN_TOKEN, len(body)) + body[:7])
        status, headers, raw, closed = read_response(sock)
    assert status == 408, raw
    assert json.loads(raw)["error"]["code"] == "request_timeout"
    assert SECRET not in raw.decode()
    assert headers.get("connection") == "close" and closed
    # nothing was created from the part that arrived
    assert gw.tenants.get_tenant("trickle-admin") is None
