"""A tenant's ``rate_limit_tpm`` over an HTTP upstream (fixtures: this folder's conftest):
its own x-ratelimit-*-tokens win over the upstream's (which count the gateway's shared
account), an unlimited tenant still gets the upstream's; an answer is charged the
upstream's ``usage``, an embeddings answer its ``usage.prompt_tokens``, and a semantic
hit nothing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.policy import TenantPolicy
from gateway.proxy.ratelimit import ALWAYS, token_bucket_key
from gateway.proxy.token_limit import embedding_tokens
from tests.gateway.conftest import Gateway, wait_until
from tests.gateway.proxy.relay.support import MODEL, Scripted, answer, ask

# The upstream's x-ratelimit-* pass to clients only under this setting (they count the
# gateway's one account: gateway/proxy/cache_counts.py); what is tested here is how
# they pass and mix with the tenant's own, so it is on.
GATEWAY_SETTINGS = {"upstream_cached_tokens": "pass"}

CHAT = "/v1/chat/completions"
TPM = 60_000  # 1,000 a second: the charges below take seconds to refill


def bucket(gw: Gateway, key: str) -> float:
    ctx = gw.tenants.authenticate(key)
    store = gw.app.state.rate_limiter.store
    taken = store.take(token_bucket_key(ctx.tenant_id, ctx.namespace_id), TPM, 0.0, ALWAYS)
    assert taken.tokens is not None
    return float(taken.tokens)


def test_embedding_tokens_are_read_from_the_usage_at_the_end() -> None:
    vectors = b'{"data":[{"embedding":[' + b"0.1," * 50_000 + b'0.1]}],"usage":'
    assert embedding_tokens(vectors + b'{"prompt_tokens":8,"total_tokens":8}}') == 8
    assert embedding_tokens(b'{"usage": {"total_tokens": 5}}') == 5
    for said in (b"{}", b"not json", b'{"usage":{"prompt_tokens":true}}', b'{"usage":[1]}'):
        assert embedding_tokens(said) == 0


def test_the_tenants_token_limit_wins_and_its_answers_are_charged(
    gw: Gateway, up: Scripted
) -> None:
    vectors = {"object": "list", "data": [{"object": "embedding", "index": 0,
               "embedding": [0.1, -0.2]}], "model": MODEL,
               "usage": {"prompt_tokens": 20_000, "total_tokens": 20_000}}  # fmt: skip
    spoken = answer("Paris is the capital.")
    spoken["usage"] = {"prompt_tokens": 3_000, "completion_tokens": 2_000, "total_tokens": 5_000}

    async def with_limits(body: dict[str, Any], request: Request) -> Response:
        headers = {"x-ratelimit-remaining-tokens": "9", "x-ratelimit-limit-tokens": "10"}
        said = vectors if "input" in body else spoken
        return JSONResponse(said, headers=headers)

    up.handler = with_limits
    limited = gw.tenant("tpm", TenantPolicy(rate_limit_tpm=TPM))[1]
    free = gw.tenant("tpm-free")[1]
    question = ask("What is the capital of France?")
    with gw.http(limited) as http:
        mine = http.post(CHAT, json=question)
        assert mine.status_code == 200, mine.text
        assert mine.headers["x-ratelimit-limit-tokens"] == str(TPM)
        assert mine.headers["x-ratelimit-remaining-tokens"] == str(TPM)
        assert wait_until(lambda: bucket(gw, limited) < TPM - 4_000)  # its usage: 5,000
        embedded = http.post("/v1/embeddings", json={"model": MODEL, "input": "x"})
        assert embedded.status_code == 200
        assert int(embedded.headers["x-ratelimit-remaining-tokens"]) < TPM - 4_000
        assert wait_until(lambda: bucket(gw, limited) < TPM - 20_000)  # its prompt_tokens
        # a semantic hit: no model ran, nothing is charged (the bucket only refills)
        before = bucket(gw, limited)
        hit = http.post(CHAT, json=question)
        assert hit.headers["x-cachegate-cache"] == "semantic-hit", hit.headers
        time.sleep(0.2)  # a charge would be in by now
        assert bucket(gw, limited) >= before
    with gw.http(free) as http:  # control: the upstream's own counts reach a free tenant
        theirs = http.post(CHAT, json=ask("limits please"))
    assert theirs.headers["x-ratelimit-remaining-tokens"] == "9"


def test_a_client_that_leaves_before_the_first_byte_is_charged_its_prompt(
    gw: Gateway, up: Scripted
) -> None:
    """The upstream is still prefilling (no byte yet) when the client gives up: the
    gateway cancels the request, and the prompt it sent is charged, estimated at four
    characters a token (it was charged nothing). Control: a tenant without the limit."""

    async def slow(body: dict[str, Any], request: Request) -> Response:
        await asyncio.sleep(3)
        return JSONResponse(answer("late"))

    up.handler = slow
    limited = gw.tenant("tpm-gone", TenantPolicy(rate_limit_tpm=TPM, semantic_enabled=False))[1]
    prompt = "word " * 4_000  # 20,000 characters: 5,000 tokens
    question = ask(prompt)
    with gw.http(limited, timeout=0.5) as http, pytest.raises(httpx.ReadTimeout):
        http.post(CHAT, json=question)
    assert wait_until(lambda: bucket(gw, limited) < TPM - 4_000, timeout=3)
