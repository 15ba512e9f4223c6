"""With ``upstream_dialect=auto``, a dialect not yet known never means "generic".

A cachegate engine sent the generic dialect (no ``cache_salt``, no trusted
namespace headers) would run every tenant in its shared namespace. So while the
upstream's ``/v1/models`` has not answered, each request tries to learn the
dialect itself; if it still cannot, the request carries the tenant's
``cache_salt`` and, with an engine key, the namespace headers. A strict server
that refuses ``cache_salt`` gets the request again without it, and is generic
from then on: working clients keep working either way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from gateway.app import Components
from gateway.policy import TenantPolicy
from gateway.proxy.http_upstream import HttpUpstream
from gateway.proxy.upstream_models import MAX_LIST_BYTES
from protocol.headers import (
    KEY_HEADER,
    KV_REUSE_HEADER,
    NAMESPACE_HEADER,
    QUOTA_HEADER,
    TENANT_HEADER,
)
from semantic import Embedder
from tests.gateway.conftest import (
    Gateway,
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
    listing: bool = False  # False: /v1/models answers ``refusal``
    refusal: int = 500
    filler: int = 0  # more model cards after ours (a listing too long to hold)
    strict: bool = False  # True: a 400 naming any field it does not know (OpenAI's words)
    echo: bool = False  # True: a temperature above 2 is a 400 quoting the messages back
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        async def models() -> Response:
            if not self.listing:
                error = {"error": {"message": "starting"}}
                return JSONResponse(error, status_code=self.refusal)
            card = {"id": MODEL, "object": "model", "owned_by": "cachegate"}
            filler = [{"id": f"m{i:07d}", "object": "model"} for i in range(self.filler)]
            return JSONResponse({"object": "list", "data": [card, *filler]})

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            body = await request.json()
            self.bodies.append(body)
            self.headers.append(dict(request.headers))
            if self.echo and body.get("temperature", 0) > 2:
                quoted = f"temperature too high for input {json.dumps(body['messages'])}"
                error = {"message": quoted, "type": "BadRequestError", "param": None}
                return JSONResponse({"error": error}, status_code=400)
            if self.strict and set(body) - {"model", "messages"}:
                unknown = sorted(set(body) - {"model", "messages"})[0]
                refusal = f"Unrecognized request argument supplied: {unknown}"
                error = {"message": refusal, "type": "invalid_request_error",
                         "param": None, "code": None}  # fmt: skip
                return JSONResponse({"error": error}, status_code=400)
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


def test_unknown_dialect_still_isolates_tenants_by_salt_and_namespace(
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
    salts = [b.get("cache_salt") for b in engine.bodies]
    assert all(salts) and salts[0] != salts[1]
    assert all("stream_options" not in b for b in engine.bodies)  # nothing else added


def test_an_anonymous_users_kv_is_marked_for_no_reuse(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    # prefix_scope "user": a request without a user has a namespace of its own, so the
    # engine is told to keep none of its KV; a named user's is kept (positive control).
    with gateway(engine, tmp_path, embedder, engine_key=ENGINE_KEY) as gw:
        key = gw.tenant("scoped", TenantPolicy(prefix_scope="user"))[1]
        with gw.http(key) as http:
            for user in (None, "alice"):
                body = ask("Who are you?") | {"cache": {"no-cache": True}}
                r = http.post(CHAT, json=body | ({"user": user} if user else {}))
                assert r.status_code == 200, r.text
    anonymous, named = engine.headers[-2:]
    assert anonymous.get(KV_REUSE_HEADER) == "off" and KV_REUSE_HEADER not in named
    assert anonymous[NAMESPACE_HEADER] != named[NAMESPACE_HEADER]


def test_the_engine_is_told_whose_request_it_is_and_its_quota(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    """Under prefix_scope "user" each end user has a namespace of their own; the engine
    keyed its per-tenant running slots and queue share by namespace, so a tenant with
    many users took them all. The gateway now sends one opaque tenant digest for all of
    a tenant's users (another tenant's differs) and the tenant's KV block quota."""
    with gateway(engine, tmp_path, embedder, engine_key=ENGINE_KEY) as gw:
        scoped = gw.tenant("scoped", TenantPolicy(prefix_scope="user", kv_block_quota=64))[1]
        other = gw.tenant("other")[1]
        for key, user in ((scoped, "alice"), (scoped, "bob"), (scoped, None), (other, "alice")):
            with gw.http(key) as http:
                body = ask("Who are you?") | {"cache": {"no-cache": True}}
                r = http.post(CHAT, json=body | ({"user": user} if user else {}))
                assert r.status_code == 200, r.text
    alice, bob, anonymous, elsewhere = engine.headers[-4:]
    assert len({h[NAMESPACE_HEADER] for h in (alice, bob, anonymous)}) == 3  # one each
    assert alice[TENANT_HEADER] == bob[TENANT_HEADER] == anonymous[TENANT_HEADER]
    assert elsewhere[TENANT_HEADER] != alice[TENANT_HEADER]  # the control
    assert "scoped" not in alice[TENANT_HEADER]  # opaque
    assert alice[QUOTA_HEADER] == "64" and QUOTA_HEADER not in elsewhere


def test_unknown_dialect_without_an_engine_key_isolates_by_salt_alone(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    with gateway(engine, tmp_path, embedder) as gw:
        for tenant in ("c", "d"):
            with gw.http(gw.tenant(tenant)[1]) as http:
                r = http.post(CHAT, json=ask("Who are you?") | {"cache": {"no-cache": True}})
            assert r.status_code == 200, r.text
    assert all(NAMESPACE_HEADER not in h and KEY_HEADER not in h for h in engine.headers)
    salts = [b.get("cache_salt") for b in engine.bodies]
    assert all(salts) and salts[0] != salts[1]


def test_a_strict_server_refusing_the_salt_gets_the_request_again_without_it(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    engine.strict = True
    with gateway(engine, tmp_path, embedder) as gw, gw.http(gw.tenant("e")[1]) as http:
        first = http.post(CHAT, json=ask("First question?"))
        second = http.post(CHAT, json=ask("Second question?"))
        # The client's own unknown field is still the client's 400, not resent.
        own = http.post(CHAT, json=ask("Third question?") | {"cache_salt": "mine"})
    assert first.status_code == 200 and second.status_code == 200, (first.text, second.text)
    assert ["cache_salt" in b for b in engine.bodies[:3]] == [True, False, False]
    assert own.status_code == 400
    assert len(engine.bodies) == 4  # generic from the refusal on: one try each


def test_a_request_learns_the_dialect_as_soon_as_the_list_answers(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    with gateway(engine, tmp_path, embedder, engine_key=ENGINE_KEY) as gw:
        with gw.http(gw.tenant("f")[1]) as http:
            assert http.post(CHAT, json=ask("First question?")).status_code == 200
            engine.listing = True  # inside the listing's retry pause: asked anyway
            r = http.post(CHAT, json=ask("Second question?"))
        assert r.status_code == 200, r.text
        [replica] = gw.state.upstream.replicas  # type: ignore[attr-defined]
        assert replica.upstream.detected.name == "cachegate"
    assert engine.headers[1].get(NAMESPACE_HEADER)


def test_a_listing_refused_with_a_4xx_leaves_the_dialect_unknown(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    # A proxy in front of our engine that 403s the listing for a while (a deploy) must
    # not make it generic: every tenant would then share the engine's namespace.
    engine.refusal = 403
    with gateway(engine, tmp_path, embedder, engine_key=ENGINE_KEY) as gw:
        for tenant in ("g", "h"):
            with gw.http(gw.tenant(tenant)[1]) as http:
                r = http.post(CHAT, json=ask("Who are you?") | {"cache": {"no-cache": True}})
            assert r.status_code == 200, r.text
        [replica] = gw.state.upstream.replicas  # type: ignore[attr-defined]
        assert replica.upstream.detected is None
    namespaces = [h.get(NAMESPACE_HEADER) for h in engine.headers]
    assert all(namespaces) and namespaces[0] != namespaces[1]
    salts = [b.get("cache_salt") for b in engine.bodies]
    assert all(salts) and salts[0] != salts[1]


def test_a_strict_server_refusing_its_listing_is_generic_once_it_refuses_the_salt(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    engine.refusal, engine.strict = 404, True
    with gateway(engine, tmp_path, embedder) as gw, gw.http(gw.tenant("i")[1]) as http:
        first = http.post(CHAT, json=ask("First question?"))
        second = http.post(CHAT, json=ask("Second question?"))
    assert first.status_code == 200 and second.status_code == 200, (first.text, second.text)
    assert ["cache_salt" in b for b in engine.bodies] == [True, False, False]


def test_a_clients_text_echoed_in_an_error_does_not_turn_the_salt_off(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    # A server that takes the salt but quotes a client's input in a 400 must not be
    # read as refusing the salt because that input names it: every tenant would lose it.
    engine.echo = True
    with gateway(engine, tmp_path, embedder) as gw, gw.http(gw.tenant("f")[1]) as http:
        bad = http.post(CHAT, json=ask("What is cache_salt?") | {"temperature": 5})
        after = http.post(CHAT, json=ask("Who are you?"))
    assert bad.status_code == 400 and after.status_code == 200, (bad.text, after.text)
    assert len(engine.bodies) == 2  # the bad request was not sent again without the salt
    assert all("cache_salt" in b for b in engine.bodies)  # before: generic from then on


def test_a_model_list_too_long_to_hold_is_no_model_list(engine: Engine) -> None:
    # A listing is trusted with model ids, not with the gateway's memory: past
    # MAX_LIST_BYTES it is not read on (and the dialect stays unknown: fail closed).
    engine.listing = True
    upstream = HttpUpstream(engine.url)
    assert asyncio.run(upstream.is_ready())  # positive control: a listing of one card
    assert upstream.detected is not None and upstream.detected.name == "cachegate"
    engine.filler = MAX_LIST_BYTES // 20  # ~37 bytes a card: about twice the cap
    huge = HttpUpstream(engine.url)
    asyncio.run(huge.is_ready())
    huge.prime()
    assert huge.detected is None and huge.models() == ["default"]


def test_a_sharing_group_named_in_any_script_reaches_the_engine(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    # The group's namespace travels in a header: one an admin named "团队" made every
    # request of the group fail (httpx refuses non-ASCII header values).
    engine.listing = True
    with gateway(engine, tmp_path, embedder, engine_key=ENGINE_KEY) as gw:
        groups = ("团队", "équipe a", "ascii-team")
        for i, group in enumerate(groups):
            key = gw.tenant(f"g{i}", TenantPolicy(prefix_namespace=group))[1]
            with gw.http(key) as http:
                r = http.post(CHAT, json=ask("Who are you?") | {"cache": {"no-cache": True}})
            assert r.status_code == 200, r.text
    sent = [h[NAMESPACE_HEADER] for h in engine.headers]
    assert sent == ["group:%E5%9B%A2%E9%98%9F", "group:%C3%A9quipe%20a", "group:ascii-team"]


def test_a_model_list_that_never_answered_refuses_no_model_and_invents_no_card(
    engine: Engine, embedder: Embedder, tmp_path: Path
) -> None:
    # /v1/models failing while the chat endpoint works (a warming server, a proxy in
    # front): unknown is not an empty list. Requests go on and the upstream judges the
    # model; the gateway's own /v1/models says "not now" instead of a made-up card.
    engine.refusal = 503
    with gateway(engine, tmp_path, embedder) as gw, gw.http(gw.tenant("m")[1]) as http:
        other = http.post(CHAT, json=ask("Which model?") | {"model": "served-but-unlisted"})
        listed = http.get("/v1/models")
        engine.listing = True  # the list answers: from now on it decides
        http.post(CHAT, json=ask("Learn the list."))  # a request re-reads an unknown list
        known = http.get("/v1/models")
        unknown = http.post(CHAT, json=ask("Which model?") | {"model": "served-but-unlisted"})
    assert other.status_code == 200, other.text
    assert engine.bodies[0]["model"] == "served-but-unlisted"
    assert listed.status_code == 503, listed.text
    assert listed.json()["error"]["code"] == "models_unavailable"
    assert listed.headers["retry-after"] == "5"
    assert [card["id"] for card in known.json()["data"]] == [MODEL]
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    assert len(engine.bodies) == 2
