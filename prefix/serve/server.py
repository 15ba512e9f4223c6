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

Handlers are module-level (``prefix/serve/completions.py`` for the two completion
routes); what they share is an :class:`EngineServer` in ``app.state.server``.

Defaults: ``temperature`` 1.0 and ``top_p`` 1.0 as in the OpenAI API;
``max_tokens`` (or ``max_completion_tokens``) defaults to what is left of the
context window, as in vLLM and the OpenAI API (a server-side cap would cut
ordinary answers short). Parameters the engine does not implement (``n`` > 1,
tools, logprobs, response_format, penalties, logit_bias, non-text content parts,
vLLM's ``min_p``, ``repetition_penalty``, ``min_tokens``, ``use_beam_search`` unless
neutral) are a 400 naming the parameter, never silently ignored. The non-standard
``ignore_eos``, ``top_k`` and ``stop_token_ids`` (as in vLLM) and ``cache_salt``
fields are accepted; other
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
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from prefix.config import EngineConfig
from prefix.serve.async_engine import AsyncEngine
from prefix.serve.completions import serve_completion
from prefix.serve.engine import PrefixEngine
from prefix.serve.metrics import CONTENT_TYPE, EngineMetrics
from prefix.serve.state import EngineServer
from prefix.serve.threads import reserve_for_engine_thread
from prefix.serve.trusted_namespace import resolve_namespace
from protocol.errors import ApiError
from protocol.headers import KEY_HEADER, NAMESPACE_HEADER
from protocol.openai import ModelCard, ModelList

__all__ = ["KEY_HEADER", "NAMESPACE_HEADER", "create_engine_app", "resolve_namespace", "run_server"]

log = logging.getLogger("cachegate.prefix.server")

router = APIRouter()


def create_engine_app(
    engine: PrefixEngine,
    *,
    served_model_name: str | None = None,
    trusted_key: str | None = None,
    max_body_bytes: int = 1_000_000,
    tracer_provider: Any = None,
) -> FastAPI:
    """An OpenAI-compatible FastAPI app over ``engine``; its lifespan runs an AsyncEngine.

    ``tracer_provider`` (an opentelemetry TracerProvider) turns on the request spans of
    ``prefix/serve/tracing.py``; without it that module is never imported."""
    server = EngineServer(
        engine=engine,
        model_name=served_model_name or engine.loaded.model_id,
        trusted_key=trusted_key,
        max_body_bytes=max_body_bytes,
        metrics=EngineMetrics(engine),
    )
    app = FastAPI(title="cachegate prefix engine", lifespan=_lifespan)
    app.state.server = server
    app.state.metrics = server.metrics
    app.state.engine = engine
    app.state.on_request_end = None
    if tracer_provider is not None:
        from prefix.serve.tracing import EngineTracing

        app.state.on_request_end = EngineTracing(tracer_provider)
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)
    app.include_router(router)
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    server: EngineServer = app.state.server
    async_engine = AsyncEngine(server.engine, on_output=server.metrics.observe)
    async_engine.start()
    server.async_engine = app.state.async_engine = async_engine
    try:
        yield
    finally:
        server.async_engine = None
        await asyncio.to_thread(async_engine.shutdown)


async def _api_error(request: Request, exc: ApiError) -> Response:
    return exc.response()


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
    return ApiError(exc.status_code, str(exc.detail), kind).response()


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error")
    return ApiError(500, f"internal error: {type(exc).__name__}", "server_error").response()


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    return await serve_completion(request, "chat")


@router.post("/v1/completions")
async def completions(request: Request) -> Response:
    return await serve_completion(request, "completion")


@router.get("/v1/models")
async def models(request: Request) -> Response:
    server: EngineServer = request.app.state.server
    card = ModelCard(id=server.model_name, max_model_len=server.engine.max_model_len)
    return JSONResponse(ModelList(data=[card]).model_dump())


@router.get("/health")
async def health(request: Request) -> Response:
    server: EngineServer = request.app.state.server
    server.running_engine()
    engine = server.engine
    return JSONResponse(
        {
            "status": "ok",
            "model": server.model_name,
            "running": engine.num_running,
            "waiting": engine.num_waiting,
        }
    )


@router.get("/metrics")
async def prometheus(request: Request) -> Response:
    server: EngineServer = request.app.state.server
    return Response(server.metrics.render(), media_type=CONTENT_TYPE)


def run_server(
    host: str,
    port: int,
    config: EngineConfig,
    trusted_key: str | None,
    *,
    served_model_name: str | None = None,
    tracer_provider: Any = None,
    uvicorn_options: Mapping[str, Any] | None = None,
    one_pool: bool = True,
) -> None:
    """Load the engine and serve it with uvicorn until interrupted (blocks).

    ``uvicorn_options`` are passed to ``uvicorn.run`` (e.g. ``log_config``).
    ``one_pool``: reserve torch's intra-op threads for the engine thread
    (prefix/serve/threads.py); False keeps them in the main thread too (the earlier
    behaviour, for comparison)."""
    import uvicorn

    if one_pool:
        threads = reserve_for_engine_thread()
        log.info("torch intra-op threads reserved for the engine thread: %d", threads)
    engine = PrefixEngine(config)
    app = create_engine_app(
        engine,
        served_model_name=served_model_name,
        trusted_key=trusted_key,
        tracer_provider=tracer_provider,
    )
    options: dict[str, Any] = {"log_level": "info"} | dict(uvicorn_options or {})
    uvicorn.run(app, host=host, port=port, **options)
