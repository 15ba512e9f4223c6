"""What an upstream shared by every tenant (a cloud API under the gateway's one account)
says besides its answers: its ``x-ratelimit-*`` headers and ``openai-processing-ms``
count that account, so they are kept from clients where isolation is not known to
hold (gateway/proxy/cache_counts.py) on its errors and its embeddings too, not only on
its chat answers; its 429 keeps them (they explain the refusal). And the rest of an
error as the upstream sent it: an empty body is no empty message, and model cards that
strict JSON cannot hold reach the client as the upstream wrote them. A review, session
43, found each of these passed or broken before."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.policy import TenantPolicy
from tests.gateway.conftest import Gateway, assert_openai_error
from tests.gateway.proxy.relay.support import CHAT, MODEL, RATE_LIMITED, Scripted, ask
from tests.live_server import serving

ACCOUNT = {
    "x-ratelimit-limit-requests": "5000",
    "x-ratelimit-remaining-requests": "4321",
    "x-ratelimit-remaining-tokens": "1994600",
    "openai-processing-ms": "187",
}
#: a card with a price the upstream wrote as NaN and a description with a lone surrogate
ODD_CARD = {"id": "odd-model", "object": "model", "owned_by": "acme-cloud",
            "pricing": {"prompt": math.nan}, "description": "caf\ud83d"}  # fmt: skip


@pytest.fixture(scope="module")
def up() -> Iterator[Scripted]:
    """The relay folder's upstream, as a cloud API (not known to isolate tenants)."""
    card = {"id": MODEL, "object": "model", "owned_by": "acme-cloud"}
    scripted = Scripted(owned_by="acme-cloud", cards=[card, ODD_CARD])
    with serving(scripted.app()) as url:
        scripted.url = url
        yield scripted


def account_headers(r: Any) -> set[str]:
    return {n for n in r.headers if n.startswith("x-ratelimit-") or n == "openai-processing-ms"}


def refusing(status: int, body: bytes = b"") -> Any:
    async def handler(payload: dict[str, Any], request: Request) -> Response:
        return Response(body, status_code=status, headers=ACCOUNT, media_type="application/json")

    return handler


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_an_upstream_error_does_not_tell_the_accounts_limits(
    gw: Gateway, up: Scripted, stream: bool
) -> None:
    error = {"error": {"message": "max_tokens must be positive", "type": "invalid_request_error",
                       "param": "max_tokens", "code": None}}  # fmt: skip
    up.handler = refusing(400, json.dumps(error).encode())
    free = gw.tenant("free-err", TenantPolicy(semantic_enabled=False))[1]
    limited = gw.tenant("lim-err", TenantPolicy(rate_limit_rpm=5, semantic_enabled=False))[1]
    with gw.http(free) as http:
        theirs = http.post(CHAT, json=ask("hello", stream=stream, max_tokens=-1))
    with gw.http(limited) as http:
        mine = http.post(CHAT, json=ask("hello", stream=stream, max_tokens=-1))
    assert_openai_error(theirs, 400)
    assert theirs.json() == error  # the upstream's own body, as it came
    assert account_headers(theirs) == set()
    assert_openai_error(mine, 400)
    # the tenant's own bucket, never the account's numbers as its own
    assert mine.headers["x-ratelimit-limit-requests"] == "5"
    assert mine.headers["x-ratelimit-remaining-requests"] == "4"
    assert account_headers(mine) == {
        f"x-ratelimit-{n}-requests" for n in ("limit", "remaining", "reset")
    }


def test_a_server_error_does_not_tell_them_either(gw: Gateway, up: Scripted) -> None:
    up.handler = refusing(500, b'{"error": {"message": "boom", "type": "server_error"}}')
    key = gw.tenant("free-500", TenantPolicy(semantic_enabled=False))[1]
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask("hello"))
    assert r.status_code == 500 and account_headers(r) == set()


def test_the_accounts_429_keeps_them(gw: Gateway, up: Scripted) -> None:
    # positive control: the refusal they explain
    up.handler = refusing(429, json.dumps(RATE_LIMITED).encode())
    key = gw.tenant("free-429", TenantPolicy(semantic_enabled=False))[1]
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask("hello"))
    assert_openai_error(r, 429)
    assert r.headers["x-ratelimit-remaining-requests"] == "4321"


def test_embeddings_do_not_tell_them(gw: Gateway, up: Scripted) -> None:
    async def embedded(payload: dict[str, Any], request: Request) -> Response:
        body = {"object": "list", "data": [{"object": "embedding", "index": 0,
                "embedding": [0.5, -0.5]}], "model": MODEL,
                "usage": {"prompt_tokens": 1, "total_tokens": 1}}  # fmt: skip
        return JSONResponse(body, headers=ACCOUNT)

    up.handler = embedded
    key = gw.tenant("free-emb", TenantPolicy(semantic_enabled=False))[1]
    with gw.http(key) as http:
        r = http.post("/v1/embeddings", json={"model": MODEL, "input": "x"})
    assert r.status_code == 200 and r.json()["data"][0]["embedding"] == [0.5, -0.5]
    assert account_headers(r) == set()


@pytest.mark.parametrize("status", [404, 413, 500, 501])
def test_an_empty_error_body_is_no_empty_message(gw: Gateway, up: Scripted, status: int) -> None:
    up.handler = refusing(status)
    key = gw.tenant(f"free-{status}", TenantPolicy(semantic_enabled=False))[1]
    with gw.http(key) as http:
        r = http.post(CHAT, json=ask("hello"))
    err = assert_openai_error(r, status if status != 501 else 502)
    assert err["message"] == f"the upstream answered {status}"


def test_model_cards_strict_json_cannot_hold_go_back_as_written(gw: Gateway) -> None:
    key = gw.tenant("cards", TenantPolicy(semantic_enabled=False))[1]
    with gw.http(key) as http:
        listed = http.get("/v1/models")
        one = http.get("/v1/models/odd-model")
        plain = http.get(f"/v1/models/{MODEL}")
    assert listed.status_code == 200 and one.status_code == 200, (listed.text, one.text)
    assert '"prompt":NaN' in one.text and "caf\\ud83d" in one.text  # escaped, as it came
    cards = json.loads(listed.text)["data"]  # Python's reader, as lenient as the upstream's
    assert [c["id"] for c in cards] == [MODEL, "odd-model"]
    assert plain.json() == {"id": MODEL, "object": "model", "owned_by": "acme-cloud"}
