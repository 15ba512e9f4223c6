"""A model the upstream's /v1/models does not list: a 404 model_not_found by default
(as the OpenAI API answers), forwarded with CACHEGATE_UPSTREAM_UNLISTED_MODELS=forward
for upstreams that serve ids they do not list (OpenRouter's variants, LiteLLM
wildcards, Azure deployments); cached under its own model id either way."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.app import Components
from gateway.proxy.upstream_models import MISSING_REREAD_SECONDS
from semantic import Embedder
from tests.gateway.conftest import Gateway, assert_openai_error, gateway_settings, running_gateway
from tests.gateway.proxy.relay.support import CHAT, MODEL, Scripted, answer, ask

VARIANT = MODEL + ":nitro"  # served, not listed


@pytest.fixture(scope="module")
def forwarding(
    up: Scripted, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("unlisted"), upstream_url=up.url, upstream_unlisted_models="forward"
    )
    with running_gateway(settings, Components(embedder=embedder)) as gateway:
        yield gateway


def serving_any_model(up: Scripted) -> list[str]:
    asked: list[str] = []

    async def handler(body: dict[str, Any], request: Request) -> Response:
        asked.append(body["model"])
        return JSONResponse(answer(f"answered by {body['model']}") | {"model": body["model"]})

    up.handler = handler
    return asked


def test_an_unlisted_model_is_refused_by_default(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    asked = serving_any_model(up)
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("What is the capital of Spain?") | {"model": VARIANT})
        listed = http.post(CHAT, json=ask("What is the capital of Spain?"))  # control
    assert assert_openai_error(r, 404)["code"] == "model_not_found"
    assert VARIANT not in r.json()["error"]["message"]  # the client's text is not quoted
    assert listed.status_code == 200 and asked == [MODEL]


def test_forwarded_when_set_and_cached_under_its_own_id(forwarding: Gateway, up: Scripted) -> None:
    asked = serving_any_model(up)
    key = forwarding.tenant("unlisted")[1]
    question = "What is the capital of Portugal?"
    with forwarding.http(key) as http:
        first = http.post(CHAT, json=ask(question) | {"model": VARIANT})
        again = http.post(CHAT, json=ask(question) | {"model": VARIANT})
        listed = http.post(CHAT, json=ask(question))  # another model: another partition
    assert first.status_code == 200, first.text
    assert again.headers["x-cachegate-cache"] == "semantic-hit"
    assert listed.headers["x-cachegate-cache"] != "semantic-hit"
    assert asked == [VARIANT, MODEL]
    assert listed.json()["choices"][0]["message"]["content"] == f"answered by {MODEL}"


def test_a_model_the_upstream_starts_serving_is_served_at_once(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    """A LoRA adapter loaded at run time (vLLM's /v1/load_lora_adapter) was refused as
    not listed until the list's refresh, up to a minute later: a model the list lacks
    has the list read again first, at most once a second (a review, session 46)."""
    asked = serving_any_model(up)
    adapter = "sql-lora"
    question = ask("What is the capital of Italy?")
    with gw.http(tenant[1]) as http:
        before = http.post(CHAT, json=question | {"model": adapter})
        assert assert_openai_error(before, 404)["code"] == "model_not_found"
        up.cards = [{"id": m, "object": "model", "owned_by": "vllm"} for m in (MODEL, adapter)]
        try:
            time.sleep(MISSING_REREAD_SECONDS + 0.1)
            loaded = http.post(CHAT, json=question | {"model": adapter})
            never = http.post(CHAT, json=question | {"model": "never-loaded"})  # control
            card = http.get(f"/v1/models/{adapter}")
        finally:
            up.cards = None
    assert loaded.status_code == 200, loaded.text
    assert asked == [adapter]
    assert assert_openai_error(never, 404)["code"] == "model_not_found"
    assert card.status_code == 200 and card.json()["id"] == adapter
