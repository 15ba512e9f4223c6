"""The scripted upstream and request helpers the relay tests share."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from gateway.proxy.upstream import UpstreamRequest
from tests.gateway.conftest import Gateway

CHAT = "/v1/chat/completions"
MODEL = "relay-model"
Handler = Callable[[dict[str, Any], Request], Awaitable[Response]]

RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for requests",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
OVERLOADED = {
    "error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}
}


class Scripted:
    """An OpenAI-compatible upstream whose chat answers come from ``handler``.
    ``owned_by`` names whose server it is (``vllm``: one that isolates tenants, so the
    gateway passes what it tells; ``dialects.py``), ``cards`` its own model list."""

    def __init__(self, owned_by: str = "vllm", cards: list[dict[str, Any]] | None = None) -> None:
        self.handler: Handler | None = None
        self.url = ""
        self.owned_by = owned_by
        self.cards = cards

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        async def models() -> Response:
            cards = self.cards or [{"id": MODEL, "object": "model", "owned_by": self.owned_by}]
            # json.dumps, not JSONResponse: a card may hold what strict JSON cannot (NaN)
            raw = json.dumps({"object": "list", "data": cards})
            return Response(raw, media_type="application/json")

        async def respond(request: Request) -> Response:
            assert self.handler is not None
            return await self.handler(await request.json(), request)

        app.post("/v1/chat/completions")(respond)
        app.post("/v1/completions")(respond)
        app.post("/v1/embeddings")(respond)
        return app


def answer(text: str, **choice: Any) -> dict[str, Any]:
    first = {"index": 0, "message": {"role": "assistant", "content": text}}
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [first | {"finish_reason": "stop", "logprobs": None} | choice],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    return "data: " + json.dumps(body | {"choices": [choice]}) + "\n\n"


DONE = "data: [DONE]\n\n"  # how every OpenAI-compatible server ends a stream


def sse(*events: str) -> Response:
    return Response("".join(events), media_type="text/event-stream")


def ask(question: str, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": question}]} | extra


def entries(gw: Gateway, tenant_id: str) -> int:
    return gw.cache.entries.count(tenant=tenant_id)


def pool_request(question: str) -> UpstreamRequest:
    return UpstreamRequest("chat", ask(question), "ns-relay", "req-relay")
