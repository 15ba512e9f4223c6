"""``POST /v1/chat/completions`` and ``/v1/completions`` on the engine server.

One request: read and parse the body once (``protocol``), resolve the trusted
namespace, build the :class:`EngineRequest` once, submit it (validation happens
there, before any byte is sent), then answer as one JSON body or as SSE chunks
built by ``protocol.responses``. A client that leaves aborts the engine request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import anyio
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from starlette.types import Receive

from prefix.core.hashing import short
from prefix.errors import NoFreeBlocksError, QueueFullError, RequestError
from prefix.serve.access_log import RequestLog
from prefix.serve.async_engine import EngineDeadError, OutputStream
from prefix.serve.openai_adapter import engine_error, to_engine_request
from prefix.serve.state import EngineServer
from prefix.serve.trusted_namespace import resolve_namespace, resolve_tenant
from protocol.errors import ApiError
from protocol.headers import KV_REUSE_HEADER
from protocol.http import EventStream, read_json
from protocol.openai import parse_request
from protocol.responses import ChunkWriter, Kind, response_body, usage


async def serve_completion(request: Request, kind: Kind) -> Response:
    srv: EngineServer = request.app.state.server
    ctx = RequestLog(srv.new_request_id(kind), request.url.path, srv.default_namespace_id)
    ctx.traceparent = request.headers.get("traceparent")  # the caller's trace, for spans
    ctx.on_finish = request.app.state.on_request_end  # None unless tracing is on
    try:
        outputs, include_usage, stream = await _submit(srv, request, kind, ctx)
    except ApiError as e:
        ctx.log(e.status, error=e.code or e.type)
        return e.response()
    writer = ChunkWriter(kind, ctx.request_id, srv.model_name, include_usage)
    if stream:
        return EventStream(_events(ctx, outputs, writer), ctx.request_id)
    try:
        text = await _collect(ctx, outputs, request.receive)
    except ApiError as e:
        ctx.log(e.status, error=e.code or e.type)
        return e.response()
    if text is None:
        ctx.log(499, error="client_disconnected")
        return Response(status_code=499)
    out = ctx.last
    assert out is not None
    use = usage(out.prompt_tokens, out.completion_tokens, out.cached_tokens)
    body = response_body(
        kind, ctx.request_id, srv.model_name, text, out.finish_reason or "stop", use
    )
    ctx.log(200)
    return JSONResponse(body, headers={"X-Request-Id": ctx.request_id})


async def _submit(
    srv: EngineServer, request: Request, kind: Kind, ctx: RequestLog
) -> tuple[OutputStream, bool, bool]:
    """Parse, build and submit the request: every 4xx is raised here, before any byte."""
    ae = srv.running_engine()
    req = parse_request(await read_json(request, srv.max_body_bytes), chat=kind == "chat")
    if req.model not in srv.accepted_models:
        raise ApiError(
            404,
            f"the model {req.model!r} does not exist; this server serves {srv.model_name!r}",
            param="model",
            code="model_not_found",
        )
    namespace = resolve_namespace(request.headers, srv.trusted_key)
    tenant, quota = resolve_tenant(request.headers, srv.trusted_key)
    # KV nothing can reuse is not kept (protocol/headers.py); it can only narrow caching.
    cache_kv = request.headers.get(KV_REUSE_HEADER, "").strip().lower() != "off"
    engine_req = await to_engine_request(
        srv.engine,
        req,
        namespace,
        request_id=ctx.request_id,
        cache_kv=cache_kv,
        kv_block_quota=quota,
        quota_key=tenant,
    )
    try:
        outputs = await ae.submit(engine_req)
    except (RequestError, QueueFullError, EngineDeadError) as e:
        raise engine_error(e, "messages" if kind == "chat" else "prompt") from None
    ctx.namespace_id = short(outputs.root)
    return outputs, req.include_usage, req.stream


async def _collect(ctx: RequestLog, outputs: OutputStream, receive: Receive) -> str | None:
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


async def _events(
    ctx: RequestLog, outputs: OutputStream, writer: ChunkWriter
) -> AsyncGenerator[str, None]:
    """The SSE events; closing this generator aborts the engine request."""
    status: int | str = 200
    outcome = "client_disconnected"
    try:
        start = writer.start()
        if start:
            yield start
        async for out in outputs:
            ctx.saw(out)
            if out.delta:
                yield writer.delta(out.delta)
            if out.finished:
                use = usage(out.prompt_tokens, out.completion_tokens, out.cached_tokens)
                for event in writer.finish(out.finish_reason or "stop", use):
                    yield event
        outcome = "finished"
    except (RequestError, NoFreeBlocksError, EngineDeadError) as e:
        err = engine_error(e)
        status, outcome = err.status, "error"
        for event in writer.error(err.body()):
            yield event
    finally:
        with anyio.CancelScope(shield=True):
            await outputs.aclose()  # aborts the engine request unless it finished
        ctx.log(status, stream=True, outcome=outcome)
