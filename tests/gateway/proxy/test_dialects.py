"""Upstream dialects: a strict generic server gets exactly the client's fields; vLLM gets
the tenant salt; several models on one upstream each have their own partition."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import Components
from semantic import Embedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.conftest import (
    Gateway,
    assert_openai_error,
    gateway_settings,
    running_gateway,
    sse_payloads,
)
from tests.gateway.scripted_upstream import Upstream, scripted_upstream

CHAT = "/v1/chat/completions"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def strict() -> Iterator[Upstream]:
    # A generic OpenAI-compatible server: names no known server, 400s on unknown fields.
    with scripted_upstream(owned_by="acme-cloud", strict=True) as upstream:
        yield upstream


def gateway_over(url: str, tmp: Path, embedder: Embedder, **extra: Any) -> Iterator[Gateway]:
    settings = gateway_settings(tmp, upstream_url=url, **extra)
    with running_gateway(settings, Components(embedder=embedder)) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def generic_gw(
    strict: Upstream, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    yield from gateway_over(strict.url, tmp_path_factory.mktemp("generic"), embedder)


def test_strict_generic_upstream_rejects_what_a_gateway_might_add(strict: Upstream) -> None:
    # Positive control: the scripted server really refuses a field it does not know.
    body = {"model": rec.MODEL, "messages": QUESTION, "cache_salt": "x"}
    r = httpx.post(f"{strict.url}/v1/chat/completions", json=body)
    assert_openai_error(r, 400, "invalid_request_error")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_generic_upstream_gets_exactly_the_clients_fields(
    generic_gw: Gateway, strict: Upstream, stream: bool
) -> None:
    key = generic_gw.tenant("generic")[1]
    client_body = {"model": rec.MODEL, "messages": QUESTION, "temperature": 0, "user": "u1"}
    if stream:
        client_body["stream"] = True
    with generic_gw.http(key) as http:
        r = http.post(CHAT, json=client_body | {"cache": {"ttl": 60}})
    assert r.status_code == 200, r.text
    assert strict.chats()[-1] == client_body  # no cache_salt, no stream_options, no `cache`
    if stream:
        assert sse_payloads(r.text)[-1]["choices"][0]["finish_reason"] == "stop"
    else:
        assert r.json()["choices"][0]["finish_reason"] == "stop"


def test_forcing_a_salted_dialect_on_a_strict_upstream_fails(
    strict: Upstream, embedder: Embedder, tmp_path: Path
) -> None:
    # The other side of the dialect: told it is vLLM, the gateway adds cache_salt and
    # the strict server refuses, with its 400 passed on to the client.
    for gw in gateway_over(strict.url, tmp_path, embedder, upstream_dialect="vllm"):
        key = gw.tenant("forced")[1]
        with gw.http(key) as http:
            r = http.post(CHAT, json={"model": rec.MODEL, "messages": QUESTION})
        assert_openai_error(r, 400, "invalid_request_error")
        assert "cache_salt" in strict.chats()[-1]


def test_several_models_each_have_their_own_partition(embedder: Embedder, tmp_path: Path) -> None:
    with scripted_upstream("vllm") as up:
        for gw in gateway_over(up.url, tmp_path, embedder):
            key = gw.tenant("models")[1]
            with gw.http(key) as http:
                assert [m["id"] for m in http.get("/v1/models").json()["data"]] == [
                    rec.MODEL,
                    rec.REASONER,
                ]
                first = http.post(CHAT, json={"model": rec.MODEL, "messages": QUESTION})
                assert first.headers["x-cachegate-backfill"] == "stored"
                other = http.post(CHAT, json={"model": rec.REASONER, "messages": QUESTION})
                again = http.post(CHAT, json={"model": rec.MODEL, "messages": QUESTION})
                unknown = http.post(CHAT, json={"model": "gpt-9", "messages": QUESTION})
            assert other.headers["x-cachegate-semantic"] == "miss:empty"
            assert again.headers["x-cachegate-cache"] == "semantic-hit"  # positive control
            assert_openai_error(unknown, 404)
            assert len(up.chats()) == 2  # the hit never reached the upstream


def test_a_streamed_answer_without_usage_is_not_stored_as_zero_tokens(
    generic_gw: Gateway, strict: Upstream
) -> None:
    # A generic server is not asked for a usage chunk (a strict one would refuse the
    # field), so a stream whose client did not ask has no token counts: stored, its hits
    # would report 0 tokens and count 0 saved. With include_usage it is stored as usual.
    key = generic_gw.tenant("usage")[1]

    def body(question: str, **extra: Any) -> dict[str, Any]:
        messages = [{"role": "user", "content": question}]
        return {"model": rec.MODEL, "messages": messages, "temperature": 0} | extra

    tides, water = "How do tides work on Earth?", "At what temperature does water boil?"
    with generic_gw.http(key) as http:
        bare = http.post(CHAT, json=body(tides, stream=True))
        sent = strict.chats()[-1]
        after_bare = http.post(CHAT, json=body(tides))
        asked = http.post(
            CHAT, json=body(water, stream=True, stream_options={"include_usage": True})
        )
        after_asked = http.post(CHAT, json=body(water))
    assert bare.status_code == 200 and asked.status_code == 200, (bare.text, asked.text)
    assert "stream_options" not in sent  # the generic server got nothing added
    assert after_bare.headers["x-cachegate-semantic"].startswith("miss")  # nothing stored
    assert after_asked.headers["x-cachegate-cache"] == "semantic-hit"  # positive control
    assert after_asked.json()["usage"]["completion_tokens"] > 0
