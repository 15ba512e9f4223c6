"""An admin invalidation that lands while a request waits for the model (semantic/fences.py).

The request's lookup missed before the invalidation; its answer comes back after it.
Before the fence, that answer was stored and served until its TTL: the answer the
operator had just removed. Here the upstream holds each answer until the test lets
it go, so the invalidation lands inside the request for certain. Controls: the same
held request without an invalidation is stored and then served; an invalidation of
*another* tenant leaves this tenant's answer stored; and once the fence is past, the
invalidated tenant's answers are stored and served again.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

import semantic.fences
from gateway.app import Components
from semantic import Embedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.admin_support import ADMIN_TOKEN, admin, new_tenant
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway
from tests.live_server import serving

CHAT = "/v1/chat/completions"
MARGIN = timedelta(seconds=0.3)  # the clock margin, shortened so the test need not wait 5 s


class HeldUpstream:
    """Answers chat completions as the recorded vLLM does, each only once released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.release.set()
        self.received = 0
        self.url = ""

    def app(self) -> FastAPI:
        app = FastAPI()
        ids = itertools.count(1)

        @app.get("/v1/models")
        async def models() -> Response:
            return JSONResponse(rec.MODEL_LIST)

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            body = await request.json()
            self.received += 1
            await asyncio.to_thread(self.release.wait, 30)
            text = f"Recorded answer to: {body['messages'][-1]['content']}"
            rid = f"chatcmpl-{next(ids):032x}"
            return JSONResponse(rec.chat_body(rid, str(body["model"]), "plain", text))

        return app


@pytest.fixture(scope="module")
def upstream() -> Iterator[HeldUpstream]:
    held = HeldUpstream()
    with serving(held.app()) as url:
        held.url = url
        yield held
    held.release.set()


@pytest.fixture(scope="module")
def gw(
    upstream: HeldUpstream, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    data_dir = tmp_path_factory.mktemp("invalidation-race")
    settings = gateway_settings(data_dir, upstream_url=upstream.url, admin_token=ADMIN_TOKEN)
    with running_gateway(settings, Components(embedder=embedder)) as g:
        yield g


@pytest.fixture(autouse=True)
def short_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semantic.fences, "FENCE_MARGIN", MARGIN)


def body(question: str) -> dict[str, Any]:
    return {"model": rec.MODEL, "messages": [{"role": "user", "content": question}]}


def held_ask(
    gw: Gateway, upstream: HeldUpstream, key: str, question: str, meanwhile: Callable[[], None]
) -> httpx.Response:
    """Ask ``question``; while the upstream holds its answer, run ``meanwhile``."""
    upstream.release.clear()
    seen = upstream.received
    with ThreadPoolExecutor(1) as pool, gw.http(key) as http:
        pending: Future[httpx.Response] = pool.submit(http.post, CHAT, json=body(question))
        deadline = time.monotonic() + 20
        while upstream.received == seen and time.monotonic() < deadline:
            time.sleep(0.02)
        assert upstream.received > seen, "the request never reached the upstream"
        meanwhile()  # the lookup has missed: the request now waits for the model
        upstream.release.set()
        r = pending.result(timeout=30)
    assert r.status_code == 200, r.text
    return r


def ask(gw: Gateway, key: str, question: str) -> httpx.Response:
    with gw.http(key) as http:
        r = http.post(CHAT, json=body(question))
    assert r.status_code == 200, r.text
    return r


def test_an_invalidation_during_the_request_keeps_its_answer_out(
    gw: Gateway, upstream: HeldUpstream
) -> None:
    question = "What is the capital of Finland?"
    with admin(gw) as client:
        key = new_tenant(client, "race-invalidated")

        def invalidate() -> None:
            assert client.delete("/tenants/race-invalidated/cache").status_code == 200

        r = held_ask(gw, upstream, key, question, invalidate)
        listed = client.get("/tenants/race-invalidated/cache/entries").json()["data"]
    assert r.headers["x-cachegate-semantic"].startswith("miss")
    assert r.headers["x-cachegate-backfill"] == "skipped:invalidated"
    assert listed == []
    again = ask(gw, key, question)  # not served the answer from before the invalidation
    assert again.headers["x-cachegate-cache"] != "semantic-hit"
    assert again.headers["x-cachegate-semantic"].startswith("miss")
    time.sleep(MARGIN.total_seconds())
    # the control after the fence: stored, then served
    assert ask(gw, key, question).headers["x-cachegate-backfill"] == "stored"
    assert ask(gw, key, question).headers["x-cachegate-cache"] == "semantic-hit"


def test_without_an_invalidation_the_held_answer_is_stored(
    gw: Gateway, upstream: HeldUpstream
) -> None:
    question = "What is the capital of Estonia?"
    with admin(gw) as client:
        key = new_tenant(client, "race-control")
        r = held_ask(gw, upstream, key, question, lambda: None)
    assert r.headers["x-cachegate-backfill"] == "stored"
    assert ask(gw, key, question).headers["x-cachegate-cache"] == "semantic-hit"


def test_another_tenants_invalidation_does_not_fence_this_one(
    gw: Gateway, upstream: HeldUpstream
) -> None:
    question = "What is the capital of Latvia?"
    with admin(gw) as client:
        key = new_tenant(client, "race-bystander")
        new_tenant(client, "race-other")

        def invalidate_other() -> None:
            assert client.delete("/tenants/race-other/cache").status_code == 200

        r = held_ask(gw, upstream, key, question, invalidate_other)
    assert r.headers["x-cachegate-backfill"] == "stored"
    assert ask(gw, key, question).headers["x-cachegate-cache"] == "semantic-hit"
