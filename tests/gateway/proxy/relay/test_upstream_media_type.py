"""What the upstream said about its JSON answer reaches the client unchanged
(gateway/proxy/media_type.py): its Content-Type with the charset, a 2xx other than
200, and an error body in the OpenAI shape as its own bytes. Before session 40 the
gateway wrote ``application/json`` over the upstream's type, answered a 201 as 200
and re-encoded an error body it only had to pass on. What does not name a JSON body
(or names one with parameters that are not a charset) is answered as the JSON it is.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import Response

from tests.gateway.conftest import Gateway
from tests.gateway.proxy.relay.support import CHAT, Scripted, answer, ask


def replies(up: Scripted, body: bytes, content_type: str, status: int = 200) -> None:
    async def handler(_body: dict[str, Any], _request: Request) -> Response:
        return Response(body, status_code=status, headers={"content-type": content_type})

    up.handler = handler


@pytest.mark.parametrize(
    ("sent", "seen"),
    [
        ("application/json; charset=utf-8", "application/json; charset=utf-8"),
        ("application/json;charset=UTF-8", "application/json;charset=UTF-8"),
        ('application/json; charset="utf-8"', 'application/json; charset="utf-8"'),
        ("application/vnd.api+json", "application/vnd.api+json"),
        ("application/json", "application/json"),
        # not a JSON type, or a parameter that is not a charset: the body is JSON
        ("text/html; charset=utf-8", "application/json"),
        ("application/json; charset=utf-8; q=<script>", "application/json"),
        ("application/json; boundary=x", "application/json"),
    ],
)
def test_a_whole_answer_keeps_the_upstreams_json_content_type(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], sent: str, seen: str
) -> None:
    raw = json.dumps(answer("Nine planets, once."), indent=1).encode()
    replies(up, raw, sent)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask(f"How many planets are there? ({sent})"))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == seen
    assert r.content == raw  # the upstream's bytes, its indentation included


def test_a_2xx_other_than_200_keeps_its_status(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    raw = json.dumps(answer("Created.")).encode()
    replies(up, raw, "application/json; charset=utf-8", status=201)
    with gw.http(tenant[1]) as http:
        first = http.post(CHAT, json=ask("Which status does a created answer have?"))
        again = http.post(CHAT, json=ask("Which status does a created answer have?"))
    assert first.status_code == 201, first.text
    assert first.content == raw
    # A hit is the gateway's own answer: a 200, whatever the first answer's status.
    assert again.headers["x-cachegate-cache"] == "semantic-hit", again.headers
    assert again.status_code == 200
    assert again.json()["choices"][0]["message"]["content"] == "Created."


@pytest.mark.parametrize("status", [400, 404, 500, 429])
def test_an_openai_shaped_error_goes_back_as_its_bytes(
    gw: Gateway, up: Scripted, tenant: tuple[str, str], status: int
) -> None:
    error = {"error": {"code": "x_1", "type": "invalid_request_error", "param": None}}
    error["error"]["message"] = "refusé: trop long"  # non-ASCII, written as UTF-8
    raw = json.dumps(error, indent=2, ensure_ascii=False).encode()
    replies(up, raw, "application/json; charset=utf-8", status=status)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("An error the upstream words itself"))
    assert r.status_code == status
    assert r.content == raw
    assert r.headers["content-type"] == "application/json; charset=utf-8"
    assert r.headers["x-request-id"]  # the gateway's own headers still go with it


def test_an_error_body_the_gateway_rewrites_is_not_sent_as_bytes(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    # SGLang's flat shape is put in OpenAI's nesting: the bytes are the gateway's.
    flat = {"object": "error", "message": "too long", "type": "BadRequestError", "code": 400}
    replies(up, json.dumps(flat).encode(), "application/json", status=400)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("A flat error body"))
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "too long"
    assert "object" not in r.json()


def test_embeddings_keep_the_upstreams_content_type(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    body = {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.5]}]}
    raw = json.dumps(body).encode()
    replies(up, raw, "application/json; charset=utf-8")
    with gw.http(tenant[1]) as http:
        r = http.post("/v1/embeddings", json={"model": "m", "input": "x"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json; charset=utf-8"
    assert r.content == raw
