"""OpenTelemetry tracing of the gateway, on only when ``CACHEGATE_OTLP_ENDPOINT`` is set.

Without it nothing here imports opentelemetry (the ``[otel]`` extra): the helpers
take ``tracer=None`` and do nothing. With it, one request's spans are::

    POST /v1/chat/completions        (server span, gateway/request_log.py; child of the
    ├── auth                          client's traceparent when it sends a valid one)
    ├── semantic.lookup
    │   ├── embed                     (skipped when the question's vector is cached)
    │   ├── search
    │   └── validate                  (one per candidate above the threshold)
    ├── upstream                      (the whole upstream answer, stream included)
    │   └── POST /v1/chat/completions (the engine server, prefix/serve/tracing.py:
    │       ├── queue                  queue, prefill, decode)
    │       ├── prefill
    │       └── decode
    └── backfill

The upstream call carries the ``upstream`` span's ``traceparent`` (and the client's
``tracestate``), so an engine server with tracing on joins the same trace.

:func:`instrument` wraps the methods of the gateway's own objects (pipeline, upstream,
and the semantic cache's embedder, index and validator) on those instances, the way
OpenTelemetry instrumentations do: ``semantic/`` knows nothing of tracing.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from gateway.proxy.upstream import Event, UpstreamRequest
    from gateway.state import GatewayState

TRACER_NAME = "cachegate.gateway"


def build_provider(endpoint: str, service_name: str) -> Any:
    """A TracerProvider exporting in batches to the OTLP/HTTP collector at ``endpoint``
    (``/v1/traces`` is appended unless the URL already names it)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    url = endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    return provider


@contextlib.contextmanager
def span(tracer: Any, name: str) -> Iterator[Any]:
    """A child span of the current one named ``name``; nothing when ``tracer`` is None."""
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name) as current:
        yield current


@contextlib.contextmanager
def server_span(tracer: Any, scope: Mapping[str, Any]) -> Iterator[Any]:
    """The request's root span, continuing the client's W3C ``traceparent`` if any."""
    if tracer is None:
        yield None
        return
    from opentelemetry.propagate import extract
    from opentelemetry.trace import SpanKind

    carrier = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    method, path = scope.get("method", "POST"), scope["path"]
    attributes = {"http.request.method": method, "url.path": path}
    with tracer.start_as_current_span(
        f"{method} {path}", context=extract(carrier), kind=SpanKind.SERVER, attributes=attributes
    ) as root:
        yield root


def instrument(gw: GatewayState, tracer: Any) -> None:
    """Spans around the gateway's steps, on these instances only (see the module doc)."""
    pipeline = gw.pipeline
    _wrap_async(pipeline, "lookup", tracer, "semantic.lookup")
    _wrap_async(pipeline, "backfill", tracer, "backfill")
    cache = pipeline.cache
    if cache is not None:  # proxies on this cache: the embedder may be shared
        cache.embedder = cast(Any, _Traced(cache.embedder, "embed", tracer, "embed"))
        cache.index = cast(Any, _Traced(cache.index, "search", tracer, "search"))
        if cache.validator is not None:
            cache.validator = cast(Any, _Traced(cache.validator, "check", tracer, "validate"))
    original: Callable[[UpstreamRequest], AsyncIterator[Event]] = gw.upstream.stream

    @functools.wraps(original)
    def stream(req: UpstreamRequest) -> AsyncIterator[Event]:
        from opentelemetry import trace
        from opentelemetry.propagate import inject
        from opentelemetry.trace import SpanKind

        upstream = tracer.start_span("upstream", kind=SpanKind.CLIENT)
        headers = {k: v for k, v in req.forward_headers.items() if k.lower() != "traceparent"}
        inject(headers, context=trace.set_span_in_context(upstream))
        return _ending(original(replace(req, forward_headers=headers)), upstream)

    setattr(gw.upstream, "stream", stream)  # noqa: B010 (an instance attribute, on purpose)


async def _ending(events: AsyncIterator[Event], upstream: Any) -> AsyncIterator[Event]:
    """``events`` unchanged; the span ends with them (finished, failed or abandoned)."""
    from opentelemetry.trace import Status, StatusCode

    try:
        async for event in events:
            yield event
    except Exception as exc:
        upstream.record_exception(exc)
        upstream.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
        upstream.end()


class _Traced:
    """``inner`` with its ``method`` run inside a span; every other attribute is inner's."""

    def __init__(self, inner: Any, method: str, tracer: Any, name: str) -> None:
        self._inner, self._method, self._tracer, self._name = inner, method, tracer, name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        if attr != self._method:
            return value

        @functools.wraps(value)
        def traced(*args: Any, **kwargs: Any) -> Any:
            with self._tracer.start_as_current_span(self._name):
                return value(*args, **kwargs)

        return traced


def _wrap_async(obj: Any, method: str, tracer: Any, name: str) -> None:
    original = getattr(obj, method)

    @functools.wraps(original)
    async def traced(*args: Any, **kwargs: Any) -> Any:
        with tracer.start_as_current_span(name):
            return await original(*args, **kwargs)

    setattr(obj, method, traced)


def gateway_tracer(endpoint: str | None, provider: Any = None) -> Any:
    """The gateway's tracer: from ``provider`` when given (tests hand in one with an
    in-memory exporter), else from a new OTLP provider when ``endpoint`` is set;
    None (tracing off, nothing imported) when neither is."""
    if provider is None and endpoint:
        provider = build_provider(endpoint, "cachegate-gateway")
    return None if provider is None else provider.get_tracer(TRACER_NAME)
