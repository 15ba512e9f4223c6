"""A scripted OpenAI-compatible upstream that speaks the recorded vLLM wire format.

It answers ``/v1/models`` and ``/v1/chat/completions`` (streamed or not) from
``tests/gateway/vllm_recordings.py``: a request with ``tools`` gets the tool
call, one asking for ``logprobs`` the logprobs answer, the reasoning model its
reasoning content, anything else a plain answer that names the question (so two
questions get two different answers). It keeps every request it received
(body and headers), so a test can check what the gateway forwarded. With
``strict=True`` it plays a strict generic server: any top-level field it does
not know is a 400, as the OpenAI API answers ``Unrecognized request argument``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.gateway import vllm_recordings as rec
from tests.live_server import serving

#: What a strict OpenAI-compatible server accepts on /v1/chat/completions.
OPENAI_CHAT_FIELDS = frozenset(
    {
        "model", "messages", "temperature", "top_p", "n", "stream", "stream_options", "stop",
        "max_tokens", "max_completion_tokens", "presence_penalty", "frequency_penalty",
        "logit_bias", "logprobs", "top_logprobs", "user", "seed", "tools", "tool_choice",
        "parallel_tool_calls", "response_format", "metadata", "store", "service_tier",
    }
)  # fmt: skip


@dataclass
class Upstream:
    url: str
    received: list[dict[str, Any]] = field(default_factory=list)  # bodies
    headers: list[dict[str, str]] = field(default_factory=list)

    def chats(self) -> list[dict[str, Any]]:
        return [b for b in self.received if "messages" in b]


def answer_text(body: dict[str, Any]) -> str:
    question = str(body["messages"][-1].get("content"))
    return f"Recorded answer to: {question}"


def scripted_app(owned_by: str, strict: bool, up: Upstream) -> FastAPI:
    app = FastAPI()
    ids = itertools.count(1)

    @app.get("/v1/models")
    async def models() -> Response:
        listing = {
            "object": "list",
            "data": [c | {"owned_by": owned_by} for c in rec.MODEL_LIST["data"]],
        }
        return JSONResponse(listing)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        up.received.append(body)
        up.headers.append(dict(request.headers))
        unknown = sorted(set(body) - OPENAI_CHAT_FIELDS)
        if strict and unknown:
            message = f"Unrecognized request argument supplied: {unknown[0]}"
            error = {"message": message, "type": "invalid_request_error", "param": None,
                     "code": None}  # fmt: skip
            return JSONResponse({"error": error}, status_code=400)
        rid = f"chatcmpl-{next(ids):032x}"
        scenario = "plain"
        if body.get("tools"):
            scenario = "tools"
        elif body.get("logprobs"):
            scenario = "logprobs"
        elif body.get("model") == rec.REASONER:
            scenario = "reasoning"
        model, text = str(body["model"]), answer_text(body)
        echo = {"x-request-id": request.headers.get("x-request-id", rid)}
        if not body.get("stream"):
            return JSONResponse(rec.chat_body(rid, model, scenario, text), headers=echo)
        options = body.get("stream_options") or {}
        chunks = rec.chat_chunks(rid, model, scenario, text, options.get("include_usage") is True)
        return Response(rec.sse(chunks), media_type="text/event-stream", headers=echo)

    return app


@contextmanager
def scripted_upstream(owned_by: str = "vllm", strict: bool = False) -> Iterator[Upstream]:
    up = Upstream("")
    with serving(scripted_app(owned_by, strict, up)) as url:
        up.url = url
        yield up
