"""An upstream's ``cached_tokens`` is no oracle across tenants.

A prefix-caching server that is shared by every tenant of the gateway (a cloud API
under the gateway's one account) tells whoever sends a prompt whether someone sent
it before. The gateway keeps that count from clients wherever the upstream's cache
is not narrowed per tenant (``gateway/proxy/cache_counts.py``), and passes it where
it is (``cache_salt`` honoured), each with its positive control.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from gateway.app import Components
from gateway.proxy.cache_counts import hide_cache_counts
from gateway.proxy.dialects import DIALECTS, GENERIC, UNKNOWN
from gateway.proxy.http_upstream import HttpUpstream
from semantic import Embedder
from tests.gateway.conftest import Gateway, gateway_settings, metric, running_gateway, sse_payloads
from tests.live_server import serving

CHAT = "/v1/chat/completions"
MODEL = "shared-model"
SECRET = [{"role": "user", "content": "Our launch code name is BLUE HERON; draft the memo."}]
PROMPT_TOKENS = 212


@dataclass
class PrefixServer:
    """Caches every prompt it sees, keyed by ``cache_salt`` only when it honours it."""

    honours_salt: bool
    url: str = ""
    seen: set[tuple[str | None, str]] = field(default_factory=set)
    reported: list[int] = field(default_factory=list)  # cached_tokens it answered with
    bodies: list[dict[str, Any]] = field(default_factory=list)  # the bodies it sent back
    salts: list[Any] = field(default_factory=list)


def prefix_app(owned_by: str, server: PrefixServer) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> Response:
        card = {"id": MODEL, "object": "model", "created": 0, "owned_by": owned_by}
        return JSONResponse({"object": "list", "data": [card]})

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        server.salts.append(body.get("cache_salt"))
        key = (
            body.get("cache_salt") if server.honours_salt else None,
            json.dumps(body["messages"]),
        )
        cached = 192 if key in server.seen else 0
        server.seen.add(key)
        server.reported.append(cached)
        usage = {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": 3,
            "total_tokens": PROMPT_TOKENS + 3,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        }
        n = len(server.reported)
        head = {"id": f"chatcmpl-{n}", "created": 1, "model": MODEL, "system_fingerprint": "fp"}
        if not body.get("stream"):
            message = {"role": "assistant", "content": f"Answer {n}.", "refusal": None}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
            out = head | {"object": "chat.completion", "choices": [choice], "usage": usage}
            server.bodies.append(out)
            return JSONResponse(out)
        chunk = head | {"object": "chat.completion.chunk"}
        events = [
            chunk | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]},
            chunk | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        options = body.get("stream_options") or {}
        if options.get("include_usage"):
            events.append(chunk | {"choices": [], "usage": usage})
        text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return Response(text, media_type="text/event-stream")

    return app


@contextmanager
def prefix_gateway(
    owned_by: str, honours_salt: bool, tmp: Path, embedder: Embedder, **extra: Any
) -> Iterator[tuple[Gateway, PrefixServer]]:
    server = PrefixServer(honours_salt)
    with serving(prefix_app(owned_by, server)) as url:
        server.url = url
        settings = gateway_settings(tmp, upstream_url=url, **extra)
        with running_gateway(settings, Components(embedder=embedder)) as gw:
            yield gw, server


def ask(gw: Gateway, key: str, stream: bool = False) -> tuple[int, Any, dict[str, str]]:
    """One request past the semantic layer; the cached_tokens the client was told,
    the body (or the usage chunk) it got, and its headers."""
    body: dict[str, Any] = {"model": MODEL, "messages": SECRET, "cache": {"no-cache": True}}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    with gw.http(key) as http:
        r = http.post(CHAT, json=body)
    assert r.status_code == 200, r.text
    got = sse_payloads(r.text)[-1] if stream else r.json()
    return int(got["usage"]["prompt_tokens_details"]["cached_tokens"]), got, dict(r.headers)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_shared_upstream_cache_does_not_tell_one_tenant_what_another_sent(
    embedder: Embedder, tmp_path: Path, stream: bool
) -> None:
    with prefix_gateway("acme-cloud", False, tmp_path, embedder) as (gw, server):
        alice, bob = gw.tenant("alice"), gw.tenant("bob")
        ask(gw, alice[1], stream)
        told, got, headers = ask(gw, bob[1], stream)
        seen = gw.metrics()
    assert server.reported == [0, 192]  # the upstream did find Alice's prompt for Bob
    assert told == 0
    # A stream's headers go before its usage is known: over HTTP they carry no count.
    assert headers.get("x-cachegate-cached-tokens", "0") == "0"
    assert headers["x-cachegate-cache"] == "bypass"  # not prefix-hit
    # The operator still counts what the upstream reused (Bob's own series).
    assert metric(seen, "cachegate_prefix_hit_tokens_total", tenant=bob[0]) == 192
    assert got["usage"]["prompt_tokens"] == PROMPT_TOKENS  # totals untouched
    assert got["usage"]["prompt_tokens_details"]["audio_tokens"] == 0
    if not stream:  # everything but the count is the upstream's body as it was
        sent = server.bodies[-1]
        sent["usage"]["prompt_tokens_details"]["cached_tokens"] = 0
        assert got == sent


def test_pass_tells_the_count_positive_control(embedder: Embedder, tmp_path: Path) -> None:
    # The same exchange with the count passed: this is the oracle the default closes.
    shared = prefix_gateway("acme-cloud", False, tmp_path, embedder, upstream_cached_tokens="pass")
    with shared as (gw, _):
        ask(gw, gw.tenant("alice")[1])
        told, _, headers = ask(gw, gw.tenant("bob")[1])
    assert told == 192 and headers["x-cachegate-cached-tokens"] == "192"
    assert headers["x-cachegate-cache"] == "prefix-hit"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_sglang_is_salted_and_its_counts_pass(
    embedder: Embedder, tmp_path: Path, stream: bool
) -> None:
    with prefix_gateway("sglang", True, tmp_path, embedder) as (gw, server):
        alice, bob = gw.tenant("alice")[1], gw.tenant("bob")[1]
        ask(gw, alice, stream)
        again, _, headers = ask(gw, alice, stream)
        other, _, _ = ask(gw, bob, stream)
    assert again == 192  # the same tenant reuses its own prefix
    if not stream:  # a stream's headers go before the upstream has said
        assert headers["x-cachegate-cache"] == "prefix-hit"
    assert other == 0 and server.reported == [0, 192, 0]  # another tenant's salt: cold
    assert all(isinstance(s, str) and len(s) == 64 for s in server.salts)
    assert server.salts[0] == server.salts[1] != server.salts[2]


def test_hide_keeps_even_an_isolated_upstreams_count(embedder: Embedder, tmp_path: Path) -> None:
    # For a vLLM or SGLang too old to honour cache_salt (it accepts and ignores it).
    old_vllm = prefix_gateway("vllm", False, tmp_path, embedder, upstream_cached_tokens="hide")
    with old_vllm as (gw, server):
        ask(gw, gw.tenant("alice")[1])
        told, _, headers = ask(gw, gw.tenant("bob")[1])
    assert server.reported == [0, 192] and told == 0
    assert headers["x-cachegate-cached-tokens"] == "0"


def test_which_dialects_hide() -> None:
    auto = HttpUpstream("http://127.0.0.1:9")
    assert [auto._hides_cached(DIALECTS[n]) for n in ("cachegate", "vllm", "sglang")] == [
        False, False, False
    ]  # fmt: skip
    assert auto._hides_cached(GENERIC) and auto._hides_cached(UNKNOWN)
    assert not HttpUpstream("http://127.0.0.1:9", cached_tokens="pass")._hides_cached(GENERIC)
    assert HttpUpstream("http://127.0.0.1:9", cached_tokens="hide")._hides_cached(DIALECTS["vllm"])
    with pytest.raises(ValueError, match="cached_tokens"):
        HttpUpstream("http://127.0.0.1:9", cached_tokens="sometimes")


def test_hide_cache_counts_per_server() -> None:
    openai: dict[str, Any] = {
        "usage": {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 32}}
    }
    assert hide_cache_counts(openai) == {
        "usage": {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": 0}}
    }
    assert openai["usage"]["prompt_tokens_details"]["cached_tokens"] == 32  # not mutated
    deepseek = {"usage": {"prompt_tokens": 50, "prompt_cache_hit_tokens": 32,
                          "prompt_cache_miss_tokens": 18}}  # fmt: skip
    assert hide_cache_counts(deepseek) == {
        "usage": {"prompt_tokens": 50, "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 50}
    }
    llama = {"choices": [], "timings": {"cache_n": 30, "prompt_n": 4, "prompt_ms": 1.5}}
    assert hide_cache_counts(llama) == {
        "choices": [], "timings": {"cache_n": 0, "prompt_n": 34, "prompt_ms": 1.5}
    }  # fmt: skip


def test_hide_cache_counts_leaves_cold_or_odd_answers_alone() -> None:
    assert hide_cache_counts({"usage": {"prompt_tokens_details": {"cached_tokens": 0}}}) is None
    assert hide_cache_counts({"usage": {"prompt_tokens": 5}}) is None
    assert hide_cache_counts({"usage": None, "timings": "x"}) is None
    assert hide_cache_counts({"choices": []}) is None
    # A count that is no count still goes to 0; there is nothing sound to move it to.
    odd = {"usage": {"prompt_cache_hit_tokens": "7", "prompt_cache_miss_tokens": 3}}
    assert hide_cache_counts(odd) == {
        "usage": {"prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 3}
    }
