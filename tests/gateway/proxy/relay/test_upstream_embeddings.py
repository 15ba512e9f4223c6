"""The model card, embeddings and responses routes behave as documented
(docs/upstreams.md): an embedding is passed through unchanged, spread over the
replicas by its input and failed over; responses is refused in the OpenAI shape.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.errors import UpstreamError
from gateway.proxy.engine_pool import EnginePool, forward_key
from tests.gateway.conftest import Gateway
from tests.gateway.proxy.relay.support import MODEL, Scripted
from tests.live_server import serving


def test_models_retrieve_embeddings_and_responses(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    received: list[dict[str, Any]] = []
    vectors = {"object": "list", "data": [{"object": "embedding", "index": 0,
               "embedding": [0.1, -0.2]}], "model": MODEL,
               "usage": {"prompt_tokens": 2, "total_tokens": 2}}  # fmt: skip

    async def embed(body: dict[str, Any], request: Request) -> Response:
        received.append(body)
        if body.get("input") == "refuse":
            error = {"message": "bad input", "type": "invalid_request_error", "param": "input"}
            return JSONResponse({"error": error | {"code": None}}, status_code=400)
        return JSONResponse(vectors, headers={"x-ratelimit-remaining-tokens": "99"})

    up.handler = embed
    sdk = gw.openai(tenant[1])
    assert sdk.models.retrieve(MODEL).id == MODEL  # the SDK's models.retrieve
    with gw.http(tenant[1]) as http:
        unknown = http.get("/v1/models/<b>secret-model</b>")
        body = {"model": MODEL, "input": "hello", "encoding_format": "float"}
        embedded = http.post("/v1/embeddings", json=body)
        refused = http.post("/v1/embeddings", json={"model": MODEL, "input": "refuse"})
        responses = http.post("/v1/responses", json={"model": MODEL, "input": "hi"})
    err = unknown.json()["error"]
    assert unknown.status_code == 404 and err["code"] == "model_not_found"
    assert "secret-model" not in unknown.text  # the client's text is not quoted
    assert embedded.status_code == 200, embedded.text
    assert embedded.json() == vectors and received[0] == body  # passed through, unchanged
    # the account's limits count every tenant's traffic: kept from clients (cache_counts.py)
    assert "x-ratelimit-remaining-tokens" not in embedded.headers
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "input"
    assert responses.status_code == 404
    assert responses.json()["error"]["code"] == "unsupported_endpoint"
    anonymous = httpx.post(gw.url + "/v1/embeddings", json=body)
    assert anonymous.status_code == 401 and len(received) == 2


def test_embeddings_spread_over_the_replicas_and_fail_over() -> None:
    # Before, every embedding went to the first replica up. Now the ring orders replicas
    # by model and input, as completions by their prompt: inputs spread, one input keeps
    # to one replica, a failed replica is marked down and the next answers, and a 429
    # moves on without marking its replica down.
    served: dict[str, list[str]] = {}
    failing: dict[str, int] = {}
    asked: list[str] = []

    def app(name: str) -> Any:
        scripted = Scripted()

        async def embed(body: dict[str, Any], request: Request) -> Response:
            asked.append(name)
            if body["input"] == "huge":  # an answer over the pool's max_body_bytes
                return JSONResponse({"object": "list", "data": [{"embedding": [0.5] * 1000}]})
            if failing.get(name):
                error = {"message": "down", "type": "server_error", "param": None, "code": None}
                return JSONResponse({"error": error}, status_code=failing[name])
            served.setdefault(name, []).append(body["input"])
            data = [{"object": "embedding", "index": 0, "embedding": [0.5]}]
            return JSONResponse({"object": "list", "data": data, "model": MODEL})

        scripted.handler = embed
        return scripted.app()

    def body(text: str) -> dict[str, Any]:
        return {"model": MODEL, "input": text}

    with serving(app("a")) as a, serving(app("b")) as b, serving(app("c")) as c:
        name = {a: "a", b: "b", c: "c"}

        async def main() -> None:
            pool = EnginePool.from_urls(
                [a, b, c], model=MODEL, dialect_name="vllm", max_body_bytes=2048
            )

            def first_choice(text: str) -> str:
                return pool.ring.preference(forward_key("/v1/embeddings", body(text)))[0]

            def is_up() -> dict[str, bool]:
                return {name[s["url"]]: s["is_up"] for s in pool.replica_states()}

            try:
                inputs = [f"text {i}" for i in range(30)]
                for text in inputs + inputs[:5]:
                    assert (await pool.forward("/v1/embeddings", body(text), "r"))[0] == 200
                assert len(served) == 3  # spread over all three
                for text in inputs[:5]:  # one input, one replica: both times its first choice
                    assert served[name[first_choice(text)]].count(text) == 2
                failed = name[first_choice("text 0")]
                failing[failed] = 500  # its replica fails: the next one answers
                assert (await pool.forward("/v1/embeddings", body("text 0"), "r"))[0] == 200
                assert sum(v.count("text 0") for v in served.values()) == 3
                assert [n for n, up in is_up().items() if not up] == [failed]
                failing[failed] = 0
                other = next(t for t in inputs if name[first_choice(t)] != failed)
                limited = name[first_choice(other)]
                failing[limited] = 429  # a rate limit: the next replica, none marked down
                assert (await pool.forward("/v1/embeddings", body(other), "r"))[0] == 200
                assert is_up()[limited]
                failing.clear()
                # Too large is the request's answer, not a replica's fault: asked once,
                # no replica marked down, the error to the client.
                asked.clear()
                with pytest.raises(UpstreamError) as caught:
                    await pool.forward("/v1/embeddings", body("huge"), "r")
                assert caught.value.code == "upstream_response_too_large"
                assert len(asked) == 1 and is_up()[asked[0]]
            finally:
                await pool.aclose()

        asyncio.run(main())
