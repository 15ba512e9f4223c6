"""Real peers for the engine-pool tests (test_engine_pool.py): tiny engine replicas
and an engine that is up but refuses work, plus small request helpers.

The replicas are our engine server (``prefix.serve.server``) over the tiny random
Llama with a toy chat template, each with its own ``PrefixEngine`` (its own KV
block pool), so prefix reuse shows which replica served a request.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response, StreamingResponse

from gateway.proxy.engine_pool import EnginePool
from gateway.proxy.upstream import Delta, Done, UpstreamRequest
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from prefix.serve.server import create_engine_app
from tests.live_server import serving

MODEL = "tiny"
ENGINE_KEY = "pool-tests-engine-key"
SALT = "pool-tests-salt"
OVERLOADED = {
    "error": {
        "message": "no free KV blocks",
        "type": "server_error",
        "param": None,
        "code": "overloaded",
    }
}


class FakeClock:
    """The pool's clock, moved by the test: cooldowns without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def with_chat_template(loaded: LoadedModel) -> LoadedModel:
    """The tiny Llama with its own tokenizer copy that has a toy chat template."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(loaded.path)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    return dataclasses.replace(loaded, tokenizer=tok, has_chat_template=True)


@contextmanager
def engine_replicas(loaded: LoadedModel, n: int) -> Iterator[list[str]]:
    """``n`` engine servers (uvicorn), each with its own cold block pool; their URLs."""
    with ExitStack() as stack:
        urls = []
        for _ in range(n):
            engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=256), loaded=loaded)
            app = create_engine_app(engine, served_model_name=MODEL, trusted_key=ENGINE_KEY)
            urls.append(stack.enter_context(serving(app)))
        yield urls


def refusing_engine_app() -> FastAPI:
    """An engine that is up (``/v1/models`` answers) but has no free blocks: chat is
    refused with HTTP 503, a streamed completion with the SSE error chunk our engine
    sends when the pool runs out after the stream has started."""
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    @app.post("/v1/chat/completions")
    async def chat() -> Response:
        return JSONResponse(OVERLOADED, status_code=503)

    @app.post("/v1/completions")
    async def completions() -> Response:
        async def events() -> AsyncIterator[str]:
            yield f"data: {json.dumps(OVERLOADED)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def make_pool(urls: list[str], clock: FakeClock | None = None, **kw: Any) -> EnginePool:
    return EnginePool.from_urls(
        urls,
        model=MODEL,
        engine_key=ENGINE_KEY,
        salt=SALT,
        dialect_name="cachegate",  # no model-list probe: a scripted peer answers once
        connect_timeout=1.0,
        read_timeout=10.0,
        clock=clock or FakeClock(),
        **kw,
    )


def words(n: int, start: int) -> str:
    """``n`` tiny-vocabulary words ("t3".."t127"), about 3.7 characters each."""
    return " ".join(f"t{3 + (start + i) % 125}" for i in range(n))


def chat(system: str, question: str, namespace: str = "tenant:a") -> UpstreamRequest:
    body = {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": question},
        ],
        "max_tokens": 2,
        "temperature": 0,
        "stream": True,  # as the gateway forwards a streamed request: chunk by chunk
    }
    return UpstreamRequest("chat", body, namespace, "chatcmpl-test")


def completion(prompt: str, namespace: str = "tenant:a", **extra: Any) -> UpstreamRequest:
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 2, "temperature": 0, "stream": True}
    body |= extra
    return UpstreamRequest("completion", body, namespace, "cmpl-test")


async def ask(pool: EnginePool, req: UpstreamRequest) -> tuple[str, Done]:
    """The whole answer: its text and the final ``Done``."""
    parts: list[str] = []
    async for event in pool.stream(req):
        if isinstance(event, Delta):
            parts.append(event.text)
        elif isinstance(event, Done):
            return "".join(parts), event
    raise AssertionError("the stream ended without Done")


def find(pool: EnginePool, make: Any, first: str, count: int = 1) -> list[UpstreamRequest]:
    """Requests (``make(i)`` for i = 0, 1, …) whose preferred replica is ``first``."""
    found: list[UpstreamRequest] = []
    for i in range(10_000):
        req = make(i)
        if pool.ring.preference(pool.key(req))[0] == first:
            found.append(req)
            if len(found) == count:
                return found
    raise AssertionError(f"no request prefers {first}")


def state(pool: EnginePool, url: str) -> dict[str, Any]:
    return next(s for s in pool.replica_states() if s["url"] == url)
