"""With ``upstream_dialect=auto``, a dialect not yet known never means "generic".

A cachegate engine sent the generic dialect (no ``cache_salt``, no trusted
namespace headers) would run every tenant in its shared namespace. So while the
upstream's ``/v1/models`` has not answered, each request tries to learn the
dialect itself; if it still cannot, the gateway sends the namespace headers
anyway when it has an engine key (other servers ignore unknown headers), and
answers 503 with ``Retry-After`` when it has none (nothing it could send would
both isolate tenants and be accepted by a strict server).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from gateway.app import Components
from protocol.headers import KEY_HEADER, NAMESPACE_HEADER
from semantic import Embedder
from tests.gateway.conftest import (
    Gateway,
    assert_openai_error,
    gateway_settings,
    running_gateway,
)
from tests.live_server import serving

CHAT = "/v1/chat/completions"
MODEL = "engine-model"
ENGINE_KEY = "dialect-tests-engine-key"


@dataclass
class Engine:
    """A cachegate-like engine whose model list can be made to fail."""

    url: str = ""
    listing: bool = False  # False: /v1/models answers 500
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        async def models() -> Response:
            if not self.listing:
                return JSONResponse({"error": {"message": "starting"}}, status_code=500)
            card = {"id": MODEL, "object": "model", "owned_by": "cachegate"}
            return JSONResponse({"object": "list", "data": [card]})

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            self.bodies.append(await request.json())
            self.headers.append(dict(request.headers))
            message = {"role": "assistant", "content": "An answer."}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return JSONResponse({"id": "chatcmpl-1", "object": "chat.completion",
                                 "created": 1, "model": MODEL, "choices": [choice]})  # fmt: skip

        return app


@pytest.fixture
def engine() -> Iterator[Engine]:
    up = Engine()
    with serving(up.app()) as url:
        up.url = url
        yield up


def gateway(
    engine: Engine, tmp: Path, embedder: Embedder, **extra: Any
) -> AbstractContextManager[Gateway]:
    settings = gateway_settings(tmp, upstream_url=engine.url, upstream_model=MODEL, **extra)
    return running_gateway(settings, Components(embedder=embedder))


def ask(question: str) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": question}]}


def test_unknown_dialect_with_an_engine_key_still_sends_the_namespace(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    with gateway(engine, tmp_path, embedder, engine_key=ENGINE_KEY) as gw:
        key_a, key_b = gw.tenant("a")[1], gw.tenant("b")[1]
        for key in (key_a, key_b):
            with gw.http(key) as http:
                r = http.post(CHAT, json=ask("Who are you?") | {"cache": {"no-cache": True}})
            assert r.status_code == 200, r.text
    namespaces = [h.get(NAMESPACE_HEADER) for h in engine.headers]
    assert all(namespaces) and namespaces[0] != namespaces[1]  # one per tenant
    assert all(h.get(KEY_HEADER) == ENGINE_KEY for h in engine.headers)
    # The body stays generic: a strict server behind `auto` must still accept it.
    assert all("cache_salt" not in b for b in engine.bodies)


def test_unknown_dialect_without_an_engine_key_is_a_503_with_retry_after(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    with gateway(engine, tmp_path, embedder) as gw, gw.http(gw.tenant("c")[1]) as http:
        r = http.post(CHAT, json=ask("Who are you?"))
    err = assert_openai_error(r, 503)
    assert err["code"] == "upstream_dialect_unknown"
    assert int(r.headers["retry-after"]) > 0
    assert engine.bodies == []  # nothing went out without isolation


def test_a_request_learns_the_dialect_as_soon_as_the_list_answers(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    with gateway(engine, tmp_path, embedder, engine_key=ENGINE_KEY) as gw:
        with gw.http(gw.tenant("d")[1]) as http:
            assert http.post(CHAT, json=ask("First question?")).status_code == 200
            engine.listing = True  # inside the listing's retry pause: asked anyway
            r = http.post(CHAT, json=ask("Second question?"))
        assert r.status_code == 200, r.text
    assert "cache_salt" not in engine.bodies[0]
    assert "cache_salt" in engine.bodies[1]  # now known: the cachegate dialect
    assert engine.headers[1].get(NAMESPACE_HEADER)
