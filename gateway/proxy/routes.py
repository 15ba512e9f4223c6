"""The OpenAI-compatible routes: auth → semantic lookup → upstream → backfill.

Response headers describe only the caller's own tenant:
``x-cachegate-cache`` (semantic-hit | prefix-hit | miss | bypass),
``x-cachegate-semantic`` (what the semantic layer did, with its reason),
``x-cachegate-similarity`` on semantic hits, ``x-cachegate-replica`` (the ordinal
of the engine replica that answered a non-streamed miss), ``x-cachegate-cached-tokens``
when the reused prefix length is known before the body starts, and (non-stream
misses) ``x-cachegate-backfill``: stored, or skipped with the reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.errors import BadRequestError, GatewayError, NotFoundError
from gateway.proxy.pipeline import CacheControl, SemanticDecision
from gateway.proxy.upstream import Delta, Done, Event, UpstreamRequest
from gateway.reports.recorder import RequestRecord
from gateway.state import GatewayState
from gateway.tenants import TenantContext
from protocol.errors import ApiError
from protocol.headers import safe_headers
from protocol.http import EventStream, read_json
from protocol.openai import new_id, parse_request
from protocol.responses import (
    ChunkWriter,
    Kind,
    answer_text,
    replay_pieces,
    response_body,
    usage,
)

router = APIRouter()


def state(request: Request) -> GatewayState:
    gw: GatewayState = request.app.state.gateway
    return gw


def bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization") or ""
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


async def authenticate(request: Request) -> TenantContext:
    tenants, key = state(request).tenants, bearer(request)
    ctx = tenants.cached(key)
    if ctx is not None:
        return ctx
    return await asyncio.to_thread(tenants.authenticate, key)


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    await authenticate(request)
    created = int(time.time())
    data = [
        {"id": m, "object": "model", "created": created, "owned_by": "cachegate"}
        for m in state(request).upstream.models()
    ]
    return JSONResponse({"object": "list", "data": data})


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    return await _handle(request, "chat")


@router.post("/v1/completions")
async def completions(request: Request) -> Response:
    return await _handle(request, "completion")


async def _handle(request: Request, kind: Kind) -> Response:
    started = time.perf_counter()
    gw = state(request)
    ctx = await authenticate(request)
    request.app.state.rate_limiter.check(ctx)  # 429 + Retry-After (gateway/proxy/ratelimit.py)
    try:
        body = await read_json(request, gw.max_body_bytes)
        parsed = parse_request(body, chat=kind == "chat")  # validates types before any work
    except ApiError as err:
        raise _bad_request(err) from None
    models = gw.upstream.models()
    if body.get("model") not in models:
        raise NotFoundError(  # never echo the requested name: it is client text
            f"the requested model does not exist; available: {models}",
            param="model",
            code="model_not_found",
        )
    cc = CacheControl.parse(request.headers.get("cache-control"))
    request_id = new_id("chatcmpl" if kind == "chat" else "cmpl")
    stream = body.get("stream") is True
    opts = body.get("stream_options")
    include_usage = stream and isinstance(opts, dict) and opts.get("include_usage") is True
    decision = await gw.pipeline.lookup(ctx, kind, body, cc)
    headers = {"x-request-id": request_id, "x-cachegate-semantic": decision.header}
    if decision.status == "hit":
        return _semantic_hit(gw, ctx, kind, body, decision, headers, stream, include_usage, started)
    upstream_req = UpstreamRequest(
        kind,
        body,
        ctx.prefix_namespace,
        request_id,
        tenant_id=ctx.tenant_id,
        kv_block_quota=ctx.policy.kv_block_quota,
        parsed=parsed,
    )
    events = gw.upstream.stream(upstream_req)
    try:
        first = await anext(events)  # errors before the first byte keep their HTTP status
    except GatewayError as err:
        gw.metrics.upstream_errors.labels(type(err).__name__).inc()
        await _close(events)
        raise
    except StopAsyncIteration:
        raise GatewayError("the upstream returned no events") from None
    flow = _Miss(gw, ctx, kind, body, decision, cc, request_id, started)
    if not stream:
        return await flow.collect(first, events, headers)
    writer = ChunkWriter(kind, request_id, body["model"], include_usage)
    cached = first.cached_tokens if isinstance(first, Delta | Done) else None
    headers |= {"x-cachegate-cache": _cache_label(decision, cached)}
    if cached is not None:
        headers["x-cachegate-cached-tokens"] = str(cached)
    return _event_stream(flow.stream(first, events, writer), request_id, headers)


def _event_stream(
    events: AsyncGenerator[str, None], request_id: str, headers: dict[str, str]
) -> EventStream:
    # EventStream sets X-Request-Id itself; passing ours too would send the header twice.
    extra = {k: v for k, v in headers.items() if k.lower() != "x-request-id"}
    return EventStream(events, request_id, safe_headers(extra))


def _bad_request(err: ApiError) -> GatewayError:
    error = BadRequestError(err.message, param=err.param, code=err.code)
    error.status = err.status
    return error


def _cache_label(decision: SemanticDecision, cached_tokens: int | None) -> str:
    if decision.status == "hit":
        return "semantic-hit"
    if cached_tokens:
        return "prefix-hit"
    return "bypass" if decision.reason == "no-cache" else "miss"


async def _close(events: AsyncIterator[Event]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()


def _semantic_hit(
    gw: GatewayState,
    ctx: TenantContext,
    kind: Kind,
    body: dict[str, Any],
    decision: SemanticDecision,
    headers: dict[str, str],
    stream: bool,
    include_usage: bool,
    started: float,
) -> Response:
    result = decision.result
    assert result is not None and result.answer is not None
    text, finish_reason = answer_text(kind, result.answer)
    stored_usage = result.answer.get("usage") or {}
    prompt_tokens = int(stored_usage.get("prompt_tokens") or 0)
    use = usage(prompt_tokens, int(stored_usage.get("completion_tokens") or 0), prompt_tokens)
    request_id = headers["x-request-id"]
    headers |= {
        "x-cachegate-cache": "semantic-hit",
        "x-cachegate-similarity": f"{result.score:.4f}",
        "x-cachegate-cached-tokens": str(prompt_tokens),
    }
    elapsed = time.perf_counter() - started
    gw.metrics.requests.labels(ctx.tenant_id, "semantic-hit").inc()
    gw.metrics.ttft.labels(ctx.tenant_id, "semantic").observe(elapsed)
    gw.metrics.latency.labels(ctx.tenant_id, "semantic").observe(elapsed)
    if gw.stats is not None:
        tokens = (prompt_tokens, prompt_tokens, use["completion_tokens"])
        ms = elapsed * 1000
        row = RequestRecord(ctx.tenant_id, "semantic-hit", decision.header, result.score, *tokens)
        gw.stats.record(row.timed(ms, ms, stream), body)
    if gw.review is not None:
        gw.review.on_hit(ctx, kind, body, decision, request_id)  # returns at once
    if not stream:
        payload = response_body(kind, request_id, body["model"], text, finish_reason, use)
        return JSONResponse(payload, headers=safe_headers(headers))
    writer = ChunkWriter(kind, request_id, body["model"], include_usage)

    async def replay() -> AsyncGenerator[str, None]:
        start = writer.start()
        if start:
            yield start
        for piece in replay_pieces(text):
            yield writer.delta(piece)
        for event in writer.finish(finish_reason, use):
            yield event

    return _event_stream(replay(), request_id, headers)


class _Miss:
    """One request answered by the upstream, collected for the backfill as it goes."""

    def __init__(
        self,
        gw: GatewayState,
        ctx: TenantContext,
        kind: Kind,
        body: dict[str, Any],
        decision: SemanticDecision,
        cc: CacheControl,
        request_id: str,
        started: float,
    ) -> None:
        self.gw, self.ctx, self.kind, self.body = gw, ctx, kind, body
        self.decision, self.cc, self.request_id, self.started = decision, cc, request_id, started
        self.parts: list[str] = []
        self.first_byte: float | None = None
        self.backfill = "skipped:not_finished"

    async def collect(
        self, first: Event, events: AsyncIterator[Event], headers: dict[str, str]
    ) -> Response:
        done: Done | None = None
        try:
            event: Event | None = first
            while event is not None:
                if isinstance(event, Delta):
                    self._saw(event)
                else:
                    done = event
                event = await anext(events, None)
        except GatewayError as err:  # broke after the first event: counted like the rest
            self.gw.metrics.upstream_errors.labels(type(err).__name__).inc()
            raise
        finally:
            await _close(events)
        assert done is not None
        payload = await self._finish(done)
        headers |= {
            "x-cachegate-cache": _cache_label(self.decision, done.cached_tokens),
            "x-cachegate-cached-tokens": str(done.cached_tokens),
            "x-cachegate-backfill": self.backfill,
        }
        if "replica_index" in done.extra:  # which engine replica answered (engine_pool.py)
            headers["x-cachegate-replica"] = str(done.extra["replica_index"])
        return JSONResponse(payload, headers=safe_headers(headers))

    async def stream(
        self, first: Event, events: AsyncIterator[Event], writer: ChunkWriter
    ) -> AsyncGenerator[str, None]:
        try:
            start = writer.start()
            if start:
                yield start
            event: Event | None = first
            while event is not None:
                if isinstance(event, Delta):
                    self._saw(event)
                    yield writer.delta(event.text)
                else:
                    payload = await self._finish(event)
                    for chunk in writer.finish(event.finish_reason, payload["usage"]):
                        yield chunk
                    return
                event = await anext(events, None)
        except GatewayError as err:
            self.gw.metrics.upstream_errors.labels(type(err).__name__).inc()
            for chunk in writer.error(err.body()):
                yield chunk
        finally:
            await _close(events)  # a client that left aborts the upstream request

    def _saw(self, delta: Delta) -> None:
        if self.first_byte is None:
            self.first_byte = time.perf_counter()
        self.parts.append(delta.text)

    async def _finish(self, done: Done) -> dict[str, Any]:
        """The response body; backfills the semantic layer when the answer is complete."""
        gw, tenant = self.gw, self.ctx.tenant_id
        use = usage(done.prompt_tokens, done.completion_tokens, done.cached_tokens)
        payload = response_body(
            self.kind,
            self.request_id,
            self.body["model"],
            "".join(self.parts),
            done.finish_reason,
            use,
        )
        self.backfill = await gw.pipeline.backfill(self.ctx, self.decision, self.cc, payload)
        label = _cache_label(self.decision, done.cached_tokens)
        gw.metrics.requests.labels(tenant, label).inc()
        gw.metrics.prefix_query_tokens.labels(tenant).inc(done.prompt_tokens)
        gw.metrics.prefix_hit_tokens.labels(tenant).inc(done.cached_tokens)
        now = time.perf_counter()
        gw.metrics.ttft.labels(tenant, "upstream").observe((self.first_byte or now) - self.started)
        gw.metrics.latency.labels(tenant, "upstream").observe(now - self.started)
        if gw.stats is not None:
            result = self.decision.result
            score = result.score if result is not None else None
            tokens = (done.prompt_tokens, done.cached_tokens, done.completion_tokens)
            row = RequestRecord(tenant, label, self.decision.header, score, *tokens)
            ttft_ms = ((self.first_byte or now) - self.started) * 1000
            row = row.timed(ttft_ms, (now - self.started) * 1000, self.body.get("stream") is True)
            gw.stats.record(row, self.body)
        return payload
