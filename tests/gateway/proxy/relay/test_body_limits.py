"""How large a request body the gateway takes: in front of an HTTP upstream, what the
upstream takes (an embeddings batch, an image as a data URI); for the in-process
engine, 1 MB of text; admin bodies 1 MB whatever the proxy's limit (session 46: the
proxy's 1 MB default refused LangChain's default embeddings batch with a 413 that the
upstream answered with 200)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.app import Components
from gateway.settings import Settings
from semantic import Embedder
from tests.gateway.admin_support import ADMIN_TOKEN, admin
from tests.gateway.conftest import Gateway, assert_openai_error, gateway_settings, running_gateway
from tests.gateway.proxy.relay.support import MODEL, Scripted


def test_the_default_limit_follows_what_answers() -> None:
    upstream = Settings(_env_file=None, upstream_url="http://127.0.0.1:9/v1", dev_tenant=None)
    in_process = Settings(_env_file=None, upstream_url=None, dev_tenant=None)
    chosen = Settings(_env_file=None, upstream_url=None, max_body_bytes=4096, dev_tenant=None)
    assert upstream.body_limit() == 32 * 2**20
    assert in_process.body_limit() == 1_000_000
    assert chosen.body_limit() == 4096
    assert upstream.admin_max_body_bytes == in_process.admin_max_body_bytes == 1_000_000


@pytest.fixture(scope="module")
def gw(
    up: Scripted, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("limits")
    settings = gateway_settings(
        data_dir, upstream_url=up.url, max_body_bytes=None, admin_token=ADMIN_TOKEN
    )
    with running_gateway(settings, Components(embedder=embedder)) as gateway:
        yield gateway


def test_an_embeddings_batch_over_a_megabyte_reaches_the_upstream(
    gw: Gateway, up: Scripted
) -> None:
    received: list[dict[str, Any]] = []

    async def embed(body: dict[str, Any], request: Request) -> Response:
        received.append(body)
        data = [{"object": "embedding", "index": i, "embedding": [0.5]}
                for i in range(len(body["input"]))]  # fmt: skip
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        return JSONResponse({"object": "list", "data": data, "model": MODEL, "usage": usage})

    up.handler = embed
    batch = [f"document {i}: " + "lorem ipsum dolor sit amet " * 40 for i in range(1000)]
    key = gw.tenant("limits")[1]
    with gw.http(key) as http:
        r = http.post("/v1/embeddings", json={"model": MODEL, "input": batch})
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()["data"]) == 1000
    assert received[0]["input"] == batch  # all of it, unchanged


def test_admin_bodies_keep_their_own_limit(gw: Gateway) -> None:
    with admin(gw) as client:
        big = {"id": "limits-big", "name": "x" * 2_000_000}  # valid JSON, over 1 MB
        assert assert_openai_error(client.post("/tenants", json=big), 413)
        # control: the same request within the limit
        ok = client.post("/tenants", json={"id": "limits-big", "name": "Big"})
        assert ok.status_code == 201, ok.text
