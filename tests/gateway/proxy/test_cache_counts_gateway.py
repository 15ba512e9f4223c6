"""An upstream's ``cached_tokens`` is no oracle across tenants, through the gateway.

A prefix-caching server that is shared by every tenant of the gateway (a cloud API
under the gateway's one account) tells whoever sends a prompt whether someone sent
it before. The gateway keeps that count from clients wherever the upstream's cache
is not known to be narrowed per tenant (``gateway/proxy/cache_counts.py``), and
passes it where it is (``cache_salt`` honoured), each with its positive control; an
answer that reports no hit keeps the upstream's bytes.
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
from semantic import Embedder
from tests.gateway.conftest import Gateway, gateway_settings, metric, running_gateway, sse_payloads
from tests.live_server import serving

MODEL = "shared-model"
SECRET = "Our launch code name is BLUE HERON; draft the memo."
PROMPT_TOKENS = 212


@dataclass
class PrefixServer:
    """Caches every prompt it sees, keyed by ``cache_salt`` only when it honours it.
    ``flavor`` picks how it reports a hit: ``openai`` (prompt_tokens_details),
    ``deepseek`` (prompt_cache_hit/miss_tokens) or ``llamacpp`` (timings)."""

    honours_salt: bool = False
    owned_by: str = "acme-cloud"
    flavor: str = "openai"
    listing: int = 200  # the status of /v1/models
    raw: bytes | None = None  # a fixed body (or stream) to send, byte for byte
    url: str = ""
    seen: set[tuple[str | None, str]] = field(default_factory=set)
    reported: list[int] = field(default_factory=list)  # cached tokens it answered with
    bodies: list[dict[str, Any]] = field(default_factory=list)  # the bodies it sent back
    salts: list[Any] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)  # sent with every answer

    def usage(self, cached: int) -> dict[str, Any]:
        use: dict[str, Any] = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": 3,
                               "total_tokens": PROMPT_TOKENS + 3}  # fmt: skip
        if self.flavor == "openai":
            use["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
        elif self.flavor == "deepseek":
            use |= {"prompt_cache_hit_tokens": cached,
                    "prompt_cache_miss_tokens": PROMPT_TOKENS - cached}  # fmt: skip
        return use

    def extra(self, cached: int) -> dict[str, Any]:
        if self.flavor != "llamacpp":
            return {}
        n = PROMPT_TOKENS - cached
        timings = {"cache_n": cached, "prompt_n": n, "prompt_ms": 2.0 * n,
                   "prompt_per_token_ms": 2.0, "prompt_per_second": 500.0}  # fmt: skip
        return {"timings": timings}

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        async def models() -> Response:
            card = {"id": MODEL, "object": "model", "created": 0, "owned_by": self.owned_by}
            return JSONResponse({"object": "list", "data": [card]}, status_code=self.listing)

        async def answer(request: Request) -> Response:
            body = await request.json()
            chat = "messages" in body
            self.salts.append(body.get("cache_salt"))
            salt = body.get("cache_salt") if self.honours_salt else None
            key = (salt, json.dumps(body["messages"] if chat else body["prompt"]))
            cached = 192 if key in self.seen else 0
            self.seen.add(key)
            self.reported.append(cached)
            if self.raw is not None:
                streamed = body.get("stream") is True
                kind = "text/event-stream" if streamed else "application/json"
                return Response(self.raw, media_type=kind)
            n = len(self.reported)
            head = {"id": f"cmpl-{n}", "created": 1, "model": MODEL, "system_fingerprint": "fp"}
            if not body.get("stream"):
                if chat:
                    message = {"role": "assistant", "content": f"Answer {n}.", "refusal": None}
                    choice: dict[str, Any] = {"index": 0, "message": message}
                else:
                    choice = {"index": 0, "text": f"Answer {n}."}
                choice |= {"logprobs": None, "finish_reason": "stop"}
                kind = "chat.completion" if chat else "text_completion"
                out = head | {"object": kind, "choices": [choice], "usage": self.usage(cached)}
                out |= self.extra(cached)
                self.bodies.append(out)
                return JSONResponse(out, headers=self.headers)
            chunk = head | {"object": "chat.completion.chunk" if chat else "text_completion"}

            def piece(text: str, finish: str | None = None) -> dict[str, Any]:
                part = {"delta": {"content": text}} if chat else {"text": text}
                return {"index": 0, "finish_reason": finish} | part

            events = [chunk | {"choices": [piece("Hi")]}]
            events.append(chunk | {"choices": [piece("", "stop")]} | self.extra(cached))
            options = body.get("stream_options") or {}
            if options.get("include_usage"):
                events.append(chunk | {"choices": [], "usage": self.usage(cached)})
            text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            return Response(text, media_type="text/event-stream", headers=self.headers)

        app.post("/v1/chat/completions")(answer)
        app.post("/v1/completions")(answer)
        return app


@contextmanager
def prefix_gateway(
    server: PrefixServer, tmp: Path, embedder: Embedder, **extra: Any
) -> Iterator[Gateway]:
    with serving(server.app()) as url:
        server.url = url
        settings = gateway_settings(tmp, upstream_url=url, upstream_model=MODEL, **extra)
        with running_gateway(settings, Components(embedder=embedder)) as gw:
            yield gw


def ask(
    gw: Gateway, key: str, stream: bool = False, chat: bool = True
) -> tuple[Any, dict[str, str], str]:
    """One request past the semantic layer: the body (or, streamed, the last chunk)
    the client got, its headers and its text as sent."""
    body: dict[str, Any] = {"model": MODEL, "cache": {"no-cache": True}}
    body |= {"messages": [{"role": "user", "content": SECRET}]} if chat else {"prompt": SECRET}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    with gw.http(key) as http:
        r = http.post("/v1/chat/completions" if chat else "/v1/completions", json=body)
    assert r.status_code == 200, r.text
    got = sse_payloads(r.text)[-1] if stream else r.json()
    return got, dict(r.headers), r.text


def told(got: dict[str, Any]) -> int:
    return int(got["usage"]["prompt_tokens_details"]["cached_tokens"])


@pytest.mark.parametrize(
    ("stream", "chat"), [(False, True), (True, True), (False, False), (True, False)],
    ids=["chat", "chat-streamed", "completion", "completion-streamed"],
)  # fmt: skip
def test_a_shared_upstream_cache_does_not_tell_one_tenant_what_another_sent(
    embedder: Embedder, tmp_path: Path, stream: bool, chat: bool
) -> None:
    server = PrefixServer()
    with prefix_gateway(server, tmp_path, embedder) as gw:
        alice, bob = gw.tenant("alice"), gw.tenant("bob")
        ask(gw, alice[1], stream, chat)
        got, headers, _ = ask(gw, bob[1], stream, chat)
        seen = gw.metrics()
    assert server.reported == [0, 192]  # the upstream did find Alice's prompt for Bob
    assert told(got) == 0
    assert headers["x-cachegate-cache"] == "bypass"  # not prefix-hit
    if not stream:  # a stream's headers go before its usage: no count in them at all
        assert headers["x-cachegate-cached-tokens"] == "0"
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
    server = PrefixServer()
    with prefix_gateway(server, tmp_path, embedder, upstream_cached_tokens="pass") as gw:
        ask(gw, gw.tenant("alice")[1])
        got, headers, _ = ask(gw, gw.tenant("bob")[1])
    assert told(got) == 192 and headers["x-cachegate-cached-tokens"] == "192"
    assert headers["x-cachegate-cache"] == "prefix-hit"


def test_deepseek_and_llamacpp_reports_are_hidden_too(embedder: Embedder, tmp_path: Path) -> None:
    deepseek = PrefixServer(flavor="deepseek")
    with prefix_gateway(deepseek, tmp_path / "d", embedder) as gw:
        ask(gw, gw.tenant("alice")[1])
        got, _, _ = ask(gw, gw.tenant("bob")[1])
    assert deepseek.reported == [0, 192] and deepseek.bodies[-1]["usage"]["prompt_cache_hit_tokens"]
    assert got["usage"]["prompt_cache_hit_tokens"] == 0
    assert got["usage"]["prompt_cache_miss_tokens"] == PROMPT_TOKENS
    llama = PrefixServer(flavor="llamacpp")
    with prefix_gateway(llama, tmp_path / "l", embedder) as gw:
        ask(gw, gw.tenant("alice")[1])
        got, _, _ = ask(gw, gw.tenant("bob")[1])
        _, _, text = ask(gw, gw.tenant("carol")[1], stream=True)
    assert llama.reported == [0, 192, 192] and llama.bodies[-1]["timings"]["cache_n"] == 192
    assert "timings" not in got and "cache_n" not in text  # its rates would give it back


def test_an_answer_without_a_hit_keeps_the_upstreams_bytes(
    embedder: Embedder, tmp_path: Path
) -> None:
    # Hiding on, nothing to hide: NaN, a lone surrogate escape, CJK text and the spacing
    # reach the client exactly as sent (a re-encoding would change every one of them).
    raw = (
        b'{"id": "c1", "object": "chat.completion", "created": 1, "model": "shared-model",'
        b' "choices": [{"index": 0, "message": {"role": "assistant", "content":'
        b' "\\u4f60\\u597d \xe4\xbd\xa0\xe5\xa5\xbd \\ud800"}, "finish_reason": "stop",'
        b' "logprobs": {"content": [{"token": "x", "logprob": NaN}]}}],'
        b' "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,'
        b' "prompt_tokens_details": {"cached_tokens": 0}}}'
    )
    server = PrefixServer(raw=raw)
    with prefix_gateway(server, tmp_path, embedder) as gw, gw.http(gw.tenant("t")[1]) as http:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.content == raw


def test_a_stream_without_a_hit_keeps_the_upstreams_lines(
    embedder: Embedder, tmp_path: Path
) -> None:
    chunk = (
        b'{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "shared-model",'
        b' "choices": [{"index": 0, "delta": {"content": "\\u4f60 \xe5\xa5\xbd \\ud800"},'
        b' "finish_reason": %s, "logprobs": {"content": [{"token": "x", "logprob": NaN}]}}]}'
    )
    usage = (
        b'{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "shared-model",'
        b' "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2,'
        b' "total_tokens": 7, "prompt_tokens_details": {"cached_tokens": 0}}}'
    )
    lines = [chunk % b"null", chunk % b'"stop"', usage]
    raw = b"".join(b"data: " + line + b"\n\n" for line in lines) + b"data: [DONE]\n\n"
    server = PrefixServer(raw=raw)
    with prefix_gateway(server, tmp_path, embedder) as gw, gw.http(gw.tenant("t")[1]) as http:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True,
                "stream_options": {"include_usage": True}}  # fmt: skip
        r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.content == raw


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_sglang_gets_the_salt_but_its_counts_are_passed_only_when_told(
    embedder: Embedder, tmp_path: Path, stream: bool
) -> None:
    # SGLang accepted cache_salt long before it honoured it, so by default its counts
    # are hidden; an operator who knows the server honours it says `pass`.
    for mode, own in (("auto", 0), ("pass", 192)):
        server = PrefixServer(honours_salt=True, owned_by="sglang")
        with prefix_gateway(server, tmp_path / mode, embedder, upstream_cached_tokens=mode) as gw:
            alice, bob = gw.tenant("alice")[1], gw.tenant("bob")[1]
            ask(gw, alice, stream)
            again, headers, _ = ask(gw, alice, stream)
            other, _, _ = ask(gw, bob, stream)
        assert server.reported == [0, 192, 0]  # the salt isolates on this server
        assert told(again) == own and told(other) == 0
        if not stream and mode == "pass":
            assert headers["x-cachegate-cache"] == "prefix-hit"
        assert all(isinstance(s, str) and len(s) == 64 for s in server.salts)
        assert server.salts[0] == server.salts[1] != server.salts[2]


def test_hide_keeps_even_an_isolated_upstreams_count(embedder: Embedder, tmp_path: Path) -> None:
    # For a vLLM too old to honour cache_salt, or a proxy before it that drops the field.
    server = PrefixServer(owned_by="vllm")
    with prefix_gateway(server, tmp_path, embedder, upstream_cached_tokens="hide") as gw:
        ask(gw, gw.tenant("alice")[1])
        got, headers, _ = ask(gw, gw.tenant("bob")[1])
    assert server.reported == [0, 192] and told(got) == 0
    assert headers["x-cachegate-cached-tokens"] == "0"


def test_vllm_counts_pass_by_default(embedder: Embedder, tmp_path: Path) -> None:
    server = PrefixServer(honours_salt=True, owned_by="vllm")
    with prefix_gateway(server, tmp_path, embedder) as gw:
        alice = gw.tenant("alice")[1]
        ask(gw, alice)
        again, _, _ = ask(gw, alice)
        other, _, _ = ask(gw, gw.tenant("bob")[1])
    assert told(again) == 192 and told(other) == 0


def test_an_upstream_not_yet_known_is_not_trusted(embedder: Embedder, tmp_path: Path) -> None:
    # Its listing fails: the dialect stays unknown and the salt goes, but a server that
    # ignores it would still report Alice's prompt to Bob.
    server = PrefixServer(owned_by="vllm", listing=503)
    with prefix_gateway(server, tmp_path, embedder) as gw:
        ask(gw, gw.tenant("alice")[1])
        got, _, _ = ask(gw, gw.tenant("bob")[1])
    assert server.reported == [0, 192] and all(server.salts)
    assert told(got) == 0
