"""One request answered by the upstream: sent to the client, collected for the backfill.

Two shapes of answer reach here. The in-process engine yields text deltas, which
are built into OpenAI bodies and chunks by ``protocol/responses.py``. An HTTP
upstream's answer is passed through: its chunks (``Delta.raw``) or its whole body
(``Done.body``) go to the client as they came, so nothing the gateway does not
need to change (tool calls, logprobs, reasoning content, the upstream's id and
``system_fingerprint``, extra usage details) is lost; the semantic layer gets the
same answer, reassembled (``gateway/proxy/passthrough.py``), to decide on storing it.

Passed through means the upstream's bytes where the gateway changes nothing: a
JSON body or a chunk that Python's strict encoder would refuse (``NaN``, a lone
surrogate escape) reaches the client as it was sent, and such an answer is not
stored, since the store could not keep it faithfully. The upstream's allowlisted
headers (rate limits, ``Retry-After``: ``passed_headers.py``) go
out with the gateway's own, which win on a clash.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
from fastapi.responses import JSONResponse, Response

from gateway.errors import GatewayError
from gateway.proxy.controls import CacheControl
from gateway.proxy.decision import SemanticDecision
from gateway.proxy.passthrough import StreamAssembly
from gateway.proxy.token_limit import estimate_prompt_tokens
from gateway.proxy.upstream import (
    Delta,
    Done,
    Event,
    KeepAlive,
    UpstreamStreamError,
    encodable,
)
from gateway.reports.recorder import RequestRecord
from gateway.request_log import note_request
from gateway.state import GatewayState
from gateway.tenants import TenantContext
from protocol.headers import safe_headers
from protocol.responses import ChunkWriter, Kind, response_body, usage

log = logging.getLogger("cachegate.gateway")

#: Finishes under way (:meth:`UpstreamAnswer._begin_finish`): each outlives its stream.
_FINISHING: set[asyncio.Task[None]] = set()


def cache_label(decision: SemanticDecision, cached_tokens: int | None) -> str:
    if decision.status == "hit":
        return "semantic-hit"
    if cached_tokens:
        return "prefix-hit"
    return "bypass" if decision.reason == "no-cache" else "miss"


async def close_events(events: AsyncIterator[Event]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()


class UpstreamAnswer:
    """One request answered by the upstream, collected for the backfill as it goes."""

    def __init__(
        self,
        gw: GatewayState,
        ctx: TenantContext,
        kind: Kind,
        body: dict[str, Any],
        decision: SemanticDecision,
        cc: CacheControl,
        response_id: str,
        started: float,
    ) -> None:
        self.gw, self.ctx, self.kind, self.body = gw, ctx, kind, body
        self.decision, self.cc, self.response_id, self.started = decision, cc, response_id, started
        self.parts: list[str] = []
        self.first_byte: float | None = None
        self.backfill = "skipped:not_finished"
        self.charged = False  # the answer's tokens taken from the tenant's tpm bucket
        self.finishing = False  # its Done came: _count charges it, whatever ends meanwhile

    async def collect(
        self, first: Event, events: AsyncIterator[Event], headers: dict[str, str]
    ) -> Response:
        done: Done | None = None
        try:
            event: Event | None = first
            while event is not None:
                if isinstance(event, Delta):
                    self._saw(event)
                elif isinstance(event, Done):
                    done = event
                    self.finishing = True
                event = await anext(events, None)
        except GatewayError as err:  # broke after the first event: counted like the rest
            self.gw.metrics.upstream_errors.labels(type(err).__name__).inc()
            raise
        finally:
            self._charge_cut_short()
            await close_events(events)
        assert done is not None
        # An HTTP upstream's body goes back unchanged; the engine's is built here.
        payload = done.body if done.body is not None else self._built(done)
        # The answer is whole: a client that leaves now (gateway/proxy/disconnect.py) has
        # cost all it will, so it is stored and counted all the same, never cut halfway.
        await self._finish_whole(self._begin_finish(done, payload))
        headers = (
            dict(done.headers)
            | headers
            | {
                # What the client may be told (cache_counts.py); metrics count the truth.
                "x-cachegate-cache": cache_label(self.decision, done.shown_cached_tokens),
                "x-cachegate-cached-tokens": str(done.shown_cached_tokens),
                "x-cachegate-backfill": self.backfill,
            }
        )
        if "replica_index" in done.extra:  # which engine replica answered (engine_pool.py)
            headers["x-cachegate-replica"] = str(done.extra["replica_index"])
        if done.raw is not None:  # the upstream's bytes: nothing to re-encode, nothing to fail
            return Response(
                done.raw,
                status_code=done.status,
                media_type=done.media_type,
                headers=safe_headers(headers),
            )
        return JSONResponse(payload, headers=safe_headers(headers))

    async def stream(
        self, first: Event, events: AsyncIterator[Event], writer: ChunkWriter
    ) -> AsyncGenerator[str, None]:
        passthrough: bool | None = None  # known at the first event that is not a comment
        assembly = StreamAssembly(self.kind)
        try:
            event: Event | None = first
            while event is not None:
                if isinstance(event, KeepAlive):
                    yield event.sse()
                    event = await anext(events, None)
                    continue
                if passthrough is None:
                    passthrough = isinstance(event, Delta) and event.raw is not None
                    start = None if passthrough else writer.start()
                    if start:
                        yield start
                if isinstance(event, Delta):
                    self._saw(event)
                    if event.raw is not None:
                        assembly.add(event.raw)
                        yield _passed_chunk(event)
                    else:
                        yield writer.delta(event.text)
                elif passthrough:
                    self.finishing = True  # counted and charged whole from here
                    said = event.extra.get("usage")
                    if assembly.usage is None and isinstance(said, dict):
                        assembly.usage = said  # the gateway's own include_usage chunk
                    if not event.ended:  # cut after its finish: as the upstream ended it
                        self.backfill = "skipped:cut_short"
                        self.gw.metrics.backfills.labels(self.ctx.tenant_id, "skipped").inc()
                        self._count_only(event, assembly.body(_usage(event)))
                        return
                    # The client's stream ends first: a slow store (a database
                    # that hangs until its timeout) must not hold back its [DONE].
                    # Begun before it is sent: a client that leaves during that send
                    # (a full socket buffer) closes this generator there.
                    finish = self._begin_finish(event, assembly.body(_usage(event)))
                    yield "data: [DONE]\n\n"
                    await self._finish_whole(finish)
                    return
                else:
                    self.finishing = True
                    payload = self._built(event)
                    finish = self._begin_finish(event, payload)  # as above
                    for chunk in writer.finish(event.finish_reason, payload["usage"]):
                        yield chunk
                    await self._finish_whole(finish)
                    return
                event = await anext(events, None)
        except GatewayError as err:
            self.gw.metrics.upstream_errors.labels(type(err).__name__).inc()
            if isinstance(err, UpstreamStreamError):
                # The upstream's own error event, unchanged: the client already has bytes,
                # so the status cannot change; the event says what went wrong.
                yield f"{err.fields}data: {err.event}\n\n"
                yield "data: [DONE]\n\n"
                return
            for chunk in writer.error(err.body()):
                yield chunk
        finally:
            self._charge_cut_short()
            await close_events(events)  # a client that left aborts the upstream request

    def _charge_cut_short(self) -> None:
        """An answer that ended before its count (a client that left, an upstream that
        broke): its prompt, estimated, and the chunks it was sent (about a token each)."""
        if not self.charged and not self.finishing:
            self._charge(estimate_prompt_tokens(self.body) + len(self.parts))

    def _charge(self, tokens: int) -> None:
        """The answer's model tokens, to its tenant's rate_limit_tpm bucket, once."""
        if self.charged:
            return
        self.charged = True
        if self.gw.charge_tokens is not None:
            try:
                self.gw.charge_tokens(self.ctx, tokens)
            except Exception:  # a limit's bookkeeping never fails an answer
                log.exception("charging tokens failed")

    def _saw(self, delta: Delta) -> None:
        if self.first_byte is None:
            self.first_byte = time.perf_counter()
        self.parts.append(delta.text)

    def _built(self, done: Done) -> dict[str, Any]:
        return response_body(
            self.kind,
            self.response_id,
            self.body["model"],
            "".join(self.parts),
            done.finish_reason,
            _usage(done),
        )

    def _begin_finish(self, done: Done, payload: dict[str, Any]) -> asyncio.Task[None]:
        """:meth:`_finish` as a task of its own, carried through even when the client
        leaves meanwhile: the answer is whole, so it has cost all it will, and is stored
        and counted (before session 44 a client that left while the last events were
        sent was neither charged nor counted, and its answer not stored)."""
        task = asyncio.ensure_future(self._finish(done, payload))
        _FINISHING.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(_FINISHING.discard)
        return task

    async def _finish_whole(self, finish: asyncio.Task[None]) -> None:
        """Wait for a begun finish; cancelled meanwhile, still let it end first."""
        try:
            await asyncio.shield(finish)
        except asyncio.CancelledError:
            await asyncio.wait((finish,))
            raise

    async def _finish(self, done: Done, payload: dict[str, Any]) -> None:
        """Backfill the semantic layer when the answer may be stored; count the request."""
        gw, tenant = self.gw, self.ctx.tenant_id
        if encodable(payload):
            self.backfill = await gw.pipeline.backfill(
                self.ctx, self.decision, self.cc, payload, usage_known=done.usage_known
            )
        else:
            # NaN/Infinity or a lone surrogate: the client got it as sent, but the store
            # would refuse it or keep something else, and a replay must be faithful.
            self.backfill = "skipped:not_storable"
            gw.metrics.backfills.labels(tenant, "skipped").inc()
        self._count_only(done, payload)

    def _count_only(self, done: Done, payload: dict[str, Any]) -> None:
        try:
            self._count(done, payload)
        except Exception:  # counting never fails an answer the client has (or is owed)
            log.exception("counting a request failed")

    def _count(self, done: Done, payload: dict[str, Any]) -> None:
        """The request's metrics, statistics row and access line."""
        gw, tenant = self.gw, self.ctx.tenant_id
        if done.usage_known:
            self._charge(done.prompt_tokens + done.completion_tokens)
        else:  # a generic upstream's stream without include_usage: estimated
            sent = max(done.completion_tokens, len(self.parts))
            self._charge(estimate_prompt_tokens(self.body) + sent)
        label = cache_label(self.decision, done.cached_tokens)
        gw.metrics.requests.labels(tenant, label).inc()
        gw.metrics.prefix_query_tokens.labels(tenant).inc(done.prompt_tokens)
        gw.metrics.prefix_hit_tokens.labels(tenant).inc(done.cached_tokens)
        now = time.perf_counter()
        gw.metrics.ttft.labels(tenant, "upstream").observe((self.first_byte or now) - self.started)
        gw.metrics.latency.labels(tenant, "upstream").observe(now - self.started)
        result, cache = self.decision.result, gw.pipeline.cache
        score = result.score if result is not None else None
        # A lookup ran: its score is on the cache's embedder's scale (the report draws
        # only the scores of the embedder in force). None when no lookup ran.
        embedder_id = cache.embedder_id if result is not None and cache is not None else None
        tokens = (done.prompt_tokens, done.cached_tokens, done.completion_tokens)
        row = RequestRecord(
            tenant,
            label,
            self.decision.header,
            score,
            *tokens,
            namespace_id=self.ctx.namespace_id,
            embedder_id=embedder_id,
        )
        if gw.saved is not None:
            gw.saved.count(row)
        if gw.stats is not None:
            ttft_ms = ((self.first_byte or now) - self.started) * 1000
            row = row.timed(ttft_ms, (now - self.started) * 1000, self.body.get("stream") is True)
            gw.stats.record(row, self.body)
            note_request(row, self.body, payload)  # the access line (gateway/request_log.py)


def _passed_chunk(delta: Delta) -> str:
    """An upstream chunk as an SSE event: its own text when the gateway did not change
    it; else re-encoded as ASCII JSON (``\\u`` escapes), which cannot fail to send. Its
    ``event:`` / ``id:`` / ``retry:`` lines go before it, as the upstream sent them."""
    if delta.line is not None:
        return f"{delta.fields}data: {delta.line}\n\n"
    return f"{delta.fields}data: {json.dumps(delta.raw, separators=(',', ':'))}\n\n"


def _usage(done: Done) -> dict[str, Any]:
    # Stored with the answer as the client saw it: a hidden count stays hidden.
    return usage(done.prompt_tokens, done.completion_tokens, done.shown_cached_tokens)
