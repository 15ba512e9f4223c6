"""A model the upstream's /v1/models does not list: a 404 model_not_found by default
(as the OpenAI API answers), forwarded with CACHEGATE_UPSTREAM_UNLISTED_MODELS=forward
for upstreams that serve ids they do not list (OpenRouter's variants, LiteLLM
wildcards, Azure deployments); cached under its own model id either way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.app import Components
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
