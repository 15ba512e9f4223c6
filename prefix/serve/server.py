"""The engine's own OpenAI-compatible model server (``cachegate engine --host --port``).

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions`` (JSON or SSE
``data: {...}`` events ending with ``data: [DONE]``), ``GET /v1/models``,
``GET /health``, ``GET /metrics`` (Prometheus).

Identity (who may reuse whose KV blocks): the prefix namespace comes only from
the trusted header ``x-cachegate-namespace``, and only when the same request
carries ``x-cachegate-engine-key`` equal to the server's ``trusted_key``
(constant-time comparison). Without a configured key, or with a missing or wrong
key, the header is ignored and the request runs in the shared namespace
``"default"``; this never fails the request. The gateway must therefore not give
a tenant the namespace ``"default"``. A body ``cache_salt`` is mixed into the
chain root on top of the namespace, so it can only narrow reuse.

Defaults: ``temperature`` 1.0 and ``top_p`` 1.0 as in the OpenAI API;
``max_tokens`` (or ``max_completion_tokens``) defaults to what is left of the
context window, capped at ``DEFAULT_MAX_TOKENS`` (256) so a forgotten limit
cannot tie up a slot for thousands of tokens; ``n`` must be 1. The non-standard
``ignore_eos`` (as in vLLM) and ``cache_salt`` fields are accepted; other
unknown fields are ignored. Every error has the OpenAI shape
``{"error": {"message", "type", "param", "code"}}``.

Each request logs one access line (logger ``cachegate.access``) with the request
id, the namespace id (a short hash of the chain root, never the key or the raw
namespace), status, TTFT and token counts; the engine logs its own per-request
line (reused tokens, first differing block).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive

from prefix.config import EngineConfig
from prefix.core.hashing import short
from prefix.errors import (
    NoFreeBlocksError,
    RequestError,
)
from prefix.model.sampling import SamplingParams
from prefix.serve.access_log import RequestLog
from prefix.serve.async_engine import AsyncEngine, EngineDeadError
from prefix.serve.engine import PrefixEngine, RequestOutput
from prefix.serve.metrics import CONTENT_TYPE, EngineMetrics
from prefix.serve.openai_adapter import (
    engine_error,
    parse_request,
    to_engine_request,
)
from prefix.serve.trusted_namespace import (
    DEFAULT_NAMESPACE,
    KEY_HEADER,
    NAMESPACE_HEADER,
    resolve_namespace,
)
from protocol.http import ApiError, EventStream, read_json, sse
from protocol.openai import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatCompletionResponse,
    CompletionChoice,
    CompletionRequest,
    CompletionResponse,
    DeltaMessage,
    ModelCard,
    ModelList,
    Usage,
    error_body,
    new_id,
)

__all__ = ["KEY_HEADER", "NAMESPACE_HEADER", "create_engine_app", "resolve_namespace", "run_server"]

log = logging.getLogger("cachegate.prefix.server")


def create_engine_app(
    engine: PrefixEngine,
    *,
    served_model_name: str | None = None,
    trusted_key: str | None = None,
    max_body_bytes: int = 1_000_000,
) -> FastAPI:
    """An OpenAI-compatible FastAPI app over ``engine``; its lifespan runs an AsyncEngine."""
    model_name = served_model_name or engine.loaded.model_id
    accepted_models = {model_name, engine.loaded.model_id}
    metrics = EngineMetrics(engine)
    holder: dict[str, AsyncEngine] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async_engine = AsyncEngine(engine, on_output=metrics.observe)
        async_engine.start()
        holder["engine"] = app.state.async_engine = async_engine
        try:
            yield
        finally:
            holder.pop("engine", None)
            await asyncio.to_thread(async_engine.shutdown)

    app = FastAPI(title="cachegate prefix engine", lifespan=lifespan)
    app.state.metrics = metrics
    app.state.engine = engine

    def running_engine() -> AsyncEngine:
        ae = holder.get("engine")
        if ae is None or not ae.is_alive:
            error = None if ae is None else ae.error
            raise ApiError(
                503, f"the engine is not running ({error!r})", "server_error", None, "engine_dead"
            )
        return ae

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return ApiError(exc.status_code, str(exc.detail), kind).response()

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error")
        return ApiError(500, f"internal error: {type(exc).__name__}", "server_error").response()

    async def prepare(
        request: Request, chat: bool, ctx: RequestLog
    ) -> tuple[ChatCompletionRequest | CompletionRequest, list[int], SamplingParams, str]:
        body = await read_json(request, max_body_bytes)
        req = parse_request(body, chat)
        if req.model not in accepted_models:
            raise ApiError(
                404,
                f"the model {req.model!r} does not exist; this server serves {model_name!r}",
                param="model",
                code="model_not_found",
            )
        namespace = resolve_namespace(request.headers, trusted_key)
        ctx.namespace_id = short(engine.chain_root(namespace, req.cache_salt))
        token_ids, params = await to_engine_request(engine, req, namespace)
        return req, token_ids, params, namespace

    async def serve(request: Request, chat: bool) -> Response:
        ctx = RequestLog(
            new_id("chatcmpl" if chat else "cmpl"),
            request.url.path,
            short(engine.chain_root(DEFAULT_NAMESPACE)),
        )
        try:
            ae = running_engine()
            req, token_ids, params, namespace = await prepare(request, chat, ctx)
        except ApiError as e:
            ctx.log(e.status, error=e.code or e.type)
            return e.response()
        # generate() is an async generator (annotated as an iterator): aclose() aborts it.
        outputs = cast(
            AsyncGenerator[RequestOutput, None],
            ae.generate(
                token_ids,
                params,
                namespace=namespace,
                cache_salt=req.cache_salt,
                request_id=ctx.request_id,
            ),
        )
        if req.stream:
            events = (chat_events if chat else completion_events)(ctx, outputs, req.include_usage)
            return EventStream(events, ctx.request_id)
        try:
            text = await collect(ctx, outputs, request.receive)
        except ApiError as e:
            ctx.log(e.status, error=e.code or e.type)
            return e.response()
        if text is None:
            ctx.log(499, error="client_disconnected")
            return Response(status_code=499)
        out = ctx.last
        assert out is not None
        usage = Usage.of(out.prompt_tokens, out.completion_tokens, out.cached_tokens)
        result: ChatCompletionResponse | CompletionResponse
        if chat:
            result = ChatCompletionResponse(
                id=ctx.request_id,
                model=model_name,
                usage=usage,
                choices=[
                    ChatChoice(
                        message=AssistantMessage(content=text), finish_reason=out.finish_reason
                    )
                ],
            )
        else:
            result = CompletionResponse(
                id=ctx.request_id,
                model=model_name,
                usage=usage,
                choices=[CompletionChoice(text=text, finish_reason=out.finish_reason)],
            )
        ctx.log(200)
        return JSONResponse(result.model_dump(), headers={"X-Request-Id": ctx.request_id})

    async def collect(
        ctx: RequestLog, outputs: AsyncGenerator[RequestOutput, None], receive: Receive
    ) -> str | None:
        """The whole completion text, or None when the client went away first."""

        async def consume() -> str:
            parts: list[str] = []
            async for out in outputs:
                ctx.saw(out)
                parts.append(out.delta)
            return "".join(parts)

        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        collector = asyncio.ensure_future(consume())
        watcher = asyncio.ensure_future(disconnected())
        try:
            await asyncio.wait({collector, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not collector.done():
                return None
            try:
                return collector.result()
            except (RequestError, NoFreeBlocksError, EngineDeadError) as e:
                raise engine_error(e) from None
        finally:
            watcher.cancel()
            collector.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.gather(collector, watcher, return_exceptions=True)
                await outputs.aclose()  # aborts the engine request unless it finished

    def chat_events(
        ctx: RequestLog, outputs: AsyncGenerator[RequestOutput, None], include_usage: bool
    ) -> AsyncGenerator[str, None]:
        def chunk(delta: DeltaMessage, reason: str | None = None) -> str:
            c = ChatCompletionChunk(
                id=ctx.request_id,
                model=model_name,
                choices=[ChatChunkChoice(delta=delta, finish_reason=reason)],
            )
            return sse(_chunk_dict(c, include_usage))

        async def body() -> AsyncGenerator[str, None]:
            yield chunk(DeltaMessage(role="assistant", content=""))
            async for out in outputs:
                ctx.saw(out)
                if out.delta:
                    yield chunk(DeltaMessage(content=out.delta))
                if out.finished:
                    yield chunk(DeltaMessage(), out.finish_reason)

        return stream_events(ctx, outputs, body(), include_usage, chat=True)

    def completion_events(
        ctx: RequestLog, outputs: AsyncGenerator[RequestOutput, None], include_usage: bool
    ) -> AsyncGenerator[str, None]:
        async def body() -> AsyncGenerator[str, None]:
            async for out in outputs:
                ctx.saw(out)
                if out.delta or out.finished:
                    c = CompletionResponse(
                        id=ctx.request_id,
                        model=model_name,
                        choices=[CompletionChoice(text=out.delta, finish_reason=out.finish_reason)],
                    )
                    yield sse(_chunk_dict(c, include_usage))

        return stream_events(ctx, outputs, body(), include_usage, chat=False)

    async def stream_events(
        ctx: RequestLog,
        outputs: AsyncGenerator[RequestOutput, None],
        body: AsyncGenerator[str, None],
        include_usage: bool,
        chat: bool,
    ) -> AsyncGenerator[str, None]:
        """The SSE events; closing this generator closes ``body`` and aborts the request."""
        status: int | str = 200
        outcome = "client_disconnected"
        try:
            async for event in body:
                yield event
            out = ctx.last
            if include_usage and out is not None:
                usage = Usage.of(out.prompt_tokens, out.completion_tokens, out.cached_tokens)
                final: ChatCompletionChunk | CompletionResponse = (
                    ChatCompletionChunk(
                        id=ctx.request_id, model=model_name, choices=[], usage=usage
                    )
                    if chat
                    else CompletionResponse(
                        id=ctx.request_id, model=model_name, choices=[], usage=usage
                    )
                )
                yield sse(final.model_dump(exclude_none=True) | {"usage": usage.model_dump()})
            outcome = "finished"
            yield "data: [DONE]\n\n"
        except (RequestError, NoFreeBlocksError, EngineDeadError) as e:
            err = engine_error(e)
            status, outcome = err.status, "error"
            yield sse(error_body(err.message, err.type, err.param, err.code))
            yield "data: [DONE]\n\n"
        finally:
            with anyio.CancelScope(shield=True):
                await body.aclose()
                await outputs.aclose()  # aborts the engine request unless it finished
            ctx.log(status, stream=True, outcome=outcome)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await serve(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await serve(request, chat=False)

    @app.get("/v1/models")
    async def models() -> Response:
        card = ModelCard(id=model_name, max_model_len=engine.max_model_len)
        return JSONResponse(ModelList(data=[card]).model_dump())

    @app.get("/health")
    async def health() -> Response:
        running_engine()
        return JSONResponse(
            {
                "status": "ok",
                "model": model_name,
                "running": engine.num_running,
                "waiting": engine.num_waiting,
            }
        )

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return app


def _chunk_dict(chunk: ChatCompletionChunk | CompletionResponse, include_usage: bool) -> dict:
    d = chunk.model_dump(exclude_none=True)
    if include_usage:
        d["usage"] = None  # as OpenAI does: null on every chunk but the last
    return d


def run_server(
    host: str,
    port: int,
    config: EngineConfig,
    trusted_key: str | None,
    *,
    served_model_name: str | None = None,
) -> None:
    """Load the engine and serve it with uvicorn until interrupted (blocks)."""
    import uvicorn

    engine = PrefixEngine(config)
    app = create_engine_app(engine, served_model_name=served_model_name, trusted_key=trusted_key)
    uvicorn.run(app, host=host, port=port, log_level="info")
