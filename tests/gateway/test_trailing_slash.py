"""The OpenAI routes answer with a trailing slash too (gateway/trailing_slash.py):
before, ``/v1/chat/completions/`` was a 307 to an address built from the gateway's
own view of the scheme, and ``/v1/models/`` a 404 for the model ``""``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.app import Components
from semantic import Embedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway
from tests.gateway.scripted_upstream import Upstream, scripted_upstream


@pytest.fixture(scope="module")
def served(
    embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Gateway, Upstream]]:
    with scripted_upstream("vllm") as up:
        settings = gateway_settings(tmp_path_factory.mktemp("slash"), upstream_url=up.url)
        with running_gateway(settings, Components(embedder=embedder)) as gw:
            yield gw, up


def test_a_trailing_slash_is_the_same_route(served: tuple[Gateway, Upstream]) -> None:
    gw, up = served
    body = {"model": rec.MODEL, "messages": [{"role": "user", "content": "Slashes?"}]}
    with gw.http(gw.tenant("slash")[1]) as http:
        plain = http.post("/v1/chat/completions", json=body)
        slashed = http.post("/v1/chat/completions/", json=body)
        twice = http.post("/v1/completions//", json={"model": rec.MODEL, "prompt": "p"})
        listed = http.get("/v1/models/")
        card = http.get(f"/v1/models/{rec.MODEL}/")
    assert plain.status_code == 200 and slashed.status_code == 200, slashed.text
    assert slashed.headers["x-cachegate-cache"] == "semantic-hit"  # the same partition
    assert slashed.json()["choices"] == plain.json()["choices"]
    assert twice.status_code != 307 and "location" not in twice.headers
    assert [m["id"] for m in listed.json()["data"]] == [rec.MODEL, rec.REASONER]
    assert card.status_code == 200 and card.json()["id"] == rec.MODEL
    assert len(up.chats()) == 1  # the second was the first one's semantic hit


def test_other_paths_are_left_alone(served: tuple[Gateway, Upstream]) -> None:
    gw, _ = served
    with gw.http() as http:
        assert http.get("/health/").status_code == 307  # not a /v1 route: as before
        assert http.get("/v1/").status_code == 404
