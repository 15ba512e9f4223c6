"""The OpenAI-compatible routes: auth → semantic lookup → upstream → backfill.

Response headers describe only the caller's own tenant:
``x-cachegate-cache`` (semantic-hit | prefix-hit | miss | bypass),
``x-cachegate-semantic`` (what the semantic layer did, with its reason),
``x-cachegate-similarity`` on semantic hits, ``x-cachegate-replica`` (the ordinal
of the engine replica that answered a non-streamed miss), ``x-cachegate-cached-tokens``
when the reused prefix length is known before the body starts, and (non-stream
misses) ``x-cachegate-backfill``: stored, or skipped with the reason.
``x-request-id`` (the client's, when well formed) and ``traceparent``/``tracestate``
are echoed and forwarded upstream (``gateway/proxy/controls.py``). A miss is
answered by ``gateway/proxy/miss.py``; over HTTP the upstream's answer is passed
through unchanged, with its allowlisted headers (``x-ratelimit-*``,
``retry-after``, ``openai-processing-ms``, ``openai-version``, its own request id
as ``x-upstream-request-id``; ``passed_headers.py``), streamed or
not; a 429 or 503 from the upstream keeps its status, body and headers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gateway.errors import (
    BadRequestError,
    GatewayError,
    NotFoundError,
    ServiceUnavailableError,
)
from gateway.proxy.access import (
    authenticate,
    hold_slot,
    rate_limit,
    state,
    with_limit_headers,
)
from gateway.proxy.controls import (
    CacheControl,
    Tracing,
    end_user,
    request_id,
    take_cache_controls,
)
from gateway.proxy.decision import SemanticDecision
from gateway.proxy.disconnect import unless_disconnected
from gateway.proxy.hit_tier import without_tier
from gateway.proxy.media_type import JSON
from gateway.proxy.miss import UpstreamAnswer, cache_label, close_events
from gateway.proxy.token_limit import embedding_tokens, estimate_prompt_tokens
from gateway.proxy.upstream import Done, KeepAlive, UpstreamRequest, encodable, usage_counts
from gateway.reports.recorder import RequestRecord
from gateway.request_log import authenticated, note_request
from gateway.state import GatewayState
from gateway.tenants import TenantContext
from protocol.errors import ApiError
from protocol.headers import safe_headers
from protocol.http import EventStream, read_json
from protocol.openai import ChatCompletionRequest, CompletionRequest, new_id, parse_request
from protocol.responses import (
    ChunkWriter,
    Kind,
    answer_extras,
    answer_lists,
    answer_shape,
    answer_text,
    replay_pieces,
    replayed_body,
    replayed_usage,
)

router = APIRouter()

log = logging.getLogger("cachegate.gateway")


#: How soon a client may ask again for a model list the upstream has not given yet
#: (the upstream client re-reads a failed listing after as long: http_upstream.py).
MODELS_RETRY_AFTER = "5"


async def known_models(gw: GatewayState, expect: str | None = None) -> list[dict[str, Any]]:
    """The upstream's model cards (read again when they lack ``expect``); a 503 with
    Retry-After while they are not known (its listing never answered): a made-up card
    would send clients to a model nobody serves."""
    cards = await gw.upstream.list_models(expect)
    if cards is None:
        raise ServiceUnavailableError(
            "the upstream's model list is not available yet; try again shortly",
            code="models_unavailable",
            headers={"Retry-After": MODELS_RETRY_AFTER},
        )
    return cards


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    """The upstream's own model cards (cached and refreshed by the upstream client)."""
    await authenticate(request)
    data = await known_models(state(request))
    return _card_json({"object": "list", "data": data}, request)


def _card_json(payload: dict[str, Any], request: Request) -> Response:
    """Model cards as the upstream wrote them: a field strict JSON cannot hold (NaN, a
    lone surrogate's escape) is what a client reading the upstream itself would get,
    so it goes back escaped as it came rather than as a 500."""
    if encodable(payload):
        return JSONResponse(payload, headers=_ids(request))
    raw = json.dumps(payload, ensure_ascii=True, separators=(",", ":")).encode()
    return Response(raw, media_type="application/json", headers=_ids(request))


def _ids(request: Request) -> dict[str, str]:
    """The request's id, which every answer carries (errors get it in error_handlers.py)."""
    return {"x-request-id": request_id(request)}


@router.get("/v1/models/{model:path}")
async def retrieve_model(request: Request, model: str) -> Response:
    """One model's card (the SDKs' ``models.retrieve``), from the upstream's list."""
    await authenticate(request)
    for card in await known_models(state(request), model):
        if card.get("id") == model:
            return _card_json(card, request)
    # the id is the client's text: not quoted back
    raise NotFoundError("the requested model does not exist", param="model", code="model_not_found")


@router.post("/v1/embeddings")
async def embeddings(request: Request) -> Response:
    """Passed through to the upstream as the client sent it (tenant-authenticated and
    rate-limited like completions, never cached; its ``usage.prompt_tokens`` count for
    the tenant's ``rate_limit_tpm``); the in-process engine has none."""
    gw = state(request)
    ctx = await authenticated(authenticate(request), gw.metrics)
    await hold_slot(request, ctx)  # released once the response has ended (ReleaseSlots)
    await rate_limit(request, ctx)
    forward = getattr(gw.upstream, "forward", None)
    if forward is None:
        raise NotFoundError(
            "embeddings are not served by the built-in engine; configure an upstream that "
            "serves them (CACHEGATE_UPSTREAM_URL)",
            code="unsupported_endpoint",
        )
    try:
        body = await read_json(request, gw.max_body_bytes, gw.body_timeout)
    except ApiError as err:
        raise _bad_request(err) from None
    rid = request_id(request)
    status, raw, passed = await forward("/v1/embeddings", body, rid)
    if gw.charge_tokens is not None and ctx.policy.rate_limit_tpm is not None and status == 200:
        gw.charge_tokens(ctx, embedding_tokens(raw))  # the tenant's tpm bucket
    said = dict(passed)
    media = said.pop("content-type", JSON)  # the upstream's JSON type, charset kept
    headers = safe_headers(said | {"x-request-id": rid})
    response = Response(raw, status_code=status, media_type=media, headers=headers)
    return with_limit_headers(request, response)


@router.post("/v1/responses")
async def responses(request: Request) -> Response:
    """Not offered: said clearly, in the OpenAI shape, rather than as a bare 404."""
    await authenticate(request)
    raise NotFoundError(
        "the Responses API is not supported by this gateway; use /v1/chat/completions",
        code="unsupported_endpoint",
    )


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    return await _handle(request, "chat")


@router.post("/v1/completions")
async def completions(request: Request) -> Response:
    return await _handle(request, "completion")


async def _handle(request: Request, kind: Kind) -> Response:
    started = time.perf_counter()
    gw = state(request)
    # The `auth` span; the access line's tenant (its digest keyed as the metrics' label).
    ctx = await authenticated(authenticate(request), gw.metrics)
    await hold_slot(request, ctx)  # released once the response has ended (ReleaseSlots)
    await rate_limit(request, ctx)
    try:
        body = await read_json(request, gw.max_body_bytes, gw.body_timeout)
        # `cache` leaves the body first: not part of the partition key, never forwarded.
        cc = take_cache_controls(body, request.headers.get("cache-control"))
        parsed = parse_request(body, chat=kind == "chat")  # validates types before any work
        user = end_user(request.headers, body, request.app.state.settings.user_header)
    except ApiError as err:
        raise _bad_request(err) from None
    ctx = ctx.for_user(user)  # the prefix namespace of a user-scoped tenant
    # The body is read: a client that leaves from here until the response starts cancels
    # the lookup or the upstream request (gateway/proxy/disconnect.py).
    answer = _answer(request, gw, ctx, kind, body, cc, parsed, user, started)
    return with_limit_headers(request, await unless_disconnected(request.receive, answer))


async def _answer(
    request: Request,
    gw: GatewayState,
    ctx: TenantContext,
    kind: Kind,
    body: dict[str, Any],
    cc: CacheControl,
    parsed: ChatCompletionRequest | CompletionRequest,
    user: str | None,
    started: float,
) -> Response:
    model = body.get("model")
    # a model the list lacks is looked for again only where it would be refused (with
    # "forward" every unlisted id is the point, and would re-read the list each second)
    expect = model if isinstance(model, str) and not gw.forward_unlisted_models else None
    cards = await gw.upstream.list_models(expect)
    # While the upstream's list is not known (its /v1/models failing while its chat
    # endpoint works) the request goes on and the upstream judges the model: a 404 here
    # would refuse every model, for good as far as a client's retries go.
    models = None if cards is None else [str(card.get("id")) for card in cards]
    if models is not None and body.get("model") not in models and not gw.forward_unlisted_models:
        raise NotFoundError(
            f"the requested model does not exist; available: {models}",
            param="model",
            code="model_not_found",
        )
    response_id = new_id("chatcmpl" if kind == "chat" else "cmpl")
    tracing = Tracing.from_headers(request.headers, response_id)
    request.state.request_id = tracing.request_id  # an error response carries it too
    stream = body.get("stream") is True
    decision = await gw.pipeline.lookup(ctx, kind, body, cc, user=user)
    headers = tracing.forward | {"x-cachegate-semantic": decision.header[:200]}
    if decision.status == "hit":
        return _semantic_hit(gw, ctx, kind, body, decision, headers, response_id, started)
    upstream_req = UpstreamRequest(
        kind,
        body,
        ctx.prefix_namespace,
        tracing.request_id,
        tenant_id=ctx.tenant_id,
        kv_block_quota=ctx.policy.kv_block_quota,
        parsed=parsed,
        forward_headers=tracing.forward,
        cache_kv=not ctx.is_prefix_private,
    )
    events = gw.upstream.stream(upstream_req)
    try:
        first = await anext(events)  # errors before the first byte keep their HTTP status
    except GatewayError as err:
        gw.metrics.upstream_errors.labels(type(err).__name__).inc()
        await close_events(events)
        raise
    except StopAsyncIteration:
        raise GatewayError("the upstream returned no events") from None
    except asyncio.CancelledError:  # the client left while it queued or was prefilled
        if gw.charge_tokens is not None:  # its prompt, estimated, to its tpm bucket
            gw.charge_tokens(ctx, estimate_prompt_tokens(body))
        raise
    flow = UpstreamAnswer(gw, ctx, kind, body, decision, cc, response_id, started)
    if not stream:
        return await flow.collect(first, events, headers)
    writer = ChunkWriter(kind, response_id, body["model"], parsed.include_usage)
    # A comment first (KeepAlive) starts the response before anything is known of the
    # answer; over HTTP the count arrives with the last chunk anyway.
    cached = (
        first.shown_cached_tokens
        if isinstance(first, Done)
        else None
        if isinstance(first, KeepAlive)
        else first.cached_tokens
    )
    # The upstream's allowlisted headers arrive with its first event; ours win a clash.
    headers = dict(first.headers) | headers | {"x-cachegate-cache": cache_label(decision, cached)}
    if cached is not None:
        headers["x-cachegate-cached-tokens"] = str(cached)
    return _event_stream(flow.stream(first, events, writer), tracing.request_id, headers)


def _event_stream(
    events: AsyncGenerator[str, None], request_id: str, headers: dict[str, str]
) -> EventStream:
    # EventStream sets X-Request-Id itself; passing ours too would send the header twice.
    extra = {k: v for k, v in headers.items() if k.lower() != "x-request-id"}
    return EventStream(events, request_id, safe_headers(extra))


def _bad_request(err: ApiError) -> GatewayError:
    error = BadRequestError(err.message, param=err.param, code=err.code, headers=err.headers)
    error.status = err.status
    return error


def _semantic_hit(
    gw: GatewayState,
    ctx: TenantContext,
    kind: Kind,
    body: dict[str, Any],
    decision: SemanticDecision,
    headers: dict[str, str],
    response_id: str,
    started: float,
) -> Response:
    result = decision.result
    assert result is not None and result.answer is not None
    stream = body.get("stream") is True
    opts = body.get("stream_options")
    include_usage = stream and isinstance(opts, dict) and opts.get("include_usage") is True
    text, finish_reason = answer_text(kind, result.answer)
    extras = answer_extras(kind, result.answer)
    lists = answer_lists(kind, result.answer)
    # the stored answer's usage as its upstream wrote it: counts read as the metrics read
    # them (a mangled field counts 0 rather than failing every hit on it), every prompt
    # token reported cached, the upstream's other usage details kept
    stored_usage = result.answer.get("usage")
    counts = usage_counts(stored_usage)
    prompt_tokens = counts["prompt_tokens"]
    use = replayed_usage(stored_usage, prompt_tokens, counts["completion_tokens"])
    request_id = headers["x-request-id"]  # the review queue's key for this request
    headers |= {
        "x-cachegate-cache": "semantic-hit",
        "x-cachegate-similarity": f"{result.score:.4f}",
        "x-cachegate-cached-tokens": str(prompt_tokens),
    }
    elapsed = time.perf_counter() - started
    gw.metrics.requests.labels(ctx.tenant_id, "semantic-hit").inc()
    gw.metrics.ttft.labels(ctx.tenant_id, "semantic").observe(elapsed)
    gw.metrics.latency.labels(ctx.tenant_id, "semantic").observe(elapsed)
    tokens = (prompt_tokens, prompt_tokens, use["completion_tokens"])
    cache = gw.pipeline.cache
    row = RequestRecord(
        ctx.tenant_id,
        "semantic-hit",
        decision.header,
        result.score,
        *tokens,
        namespace_id=ctx.namespace_id,
        # the scale ``score`` is on: the report draws only the embedder in force's scores
        embedder_id=None if cache is None else cache.embedder_id,
    )
    try:
        if gw.saved is not None:
            gw.saved.count(row)
        if gw.stats is not None:
            ms = elapsed * 1000
            gw.stats.record(row.timed(ms, ms, stream), body)
            note_request(row.timed(ms, ms, stream), body, text)  # access line (request_log.py)
    except Exception:  # counting never fails a hit
        log.exception("counting a semantic hit failed")
    if gw.review is not None:
        gw.review.on_hit(ctx, kind, body, decision, request_id)  # returns at once
    # A hit is the stored answer as the upstream gave it (its model, system_fingerprint,
    # message and usage details): only the id, created and the cached-token accounting
    # are the hit's own, and the service tier, which no tier chose (hit_tier.py).
    answer = without_tier(result.answer)
    if not stream:
        payload = replayed_body(kind, response_id, body["model"], answer, use)
        return JSONResponse(payload, headers=safe_headers(headers))
    shape = answer_shape(kind, answer)
    model = shape.model or body["model"]
    writer = ChunkWriter(kind, response_id, model, include_usage, shape.chunk_fields())

    async def replay() -> AsyncGenerator[str, None]:
        start = writer.start()
        if start:
            yield start
        for name, value in extras.items():  # e.g. a reasoning model's reasoning_content
            for piece in replay_pieces(value):
                yield writer.delta(piece, field=name)
        for piece in replay_pieces(text):
            yield writer.delta(piece)
        for name, items in lists.items():  # url citations: one delta, whole
            yield writer.delta(items, field=name)
        for event in writer.finish(finish_reason, use, shape.choice):  # as the body has them
            yield event

    return _event_stream(replay(), request_id, headers)
