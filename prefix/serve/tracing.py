"""OpenTelemetry spans of the engine server, when ``cachegate engine`` runs with tracing.

``create_engine_app(tracer_provider=...)`` imports this module only when it is handed
a provider; opentelemetry itself is imported here, on the first finished request.
Each request becomes, once its access line is written (``prefix/serve/access_log.py``)::

    POST /v1/chat/completions   server span: child of the caller's ``traceparent``
    ├── queue                    arrival in the engine → first prefill step
    ├── prefill                  first prefill step → first token
    └── decode                   first token → the request's end

The times come from the engine itself (``RequestOutput.arrival_at``,
``scheduled_at``, ``ttft_s``), so the spans are made after the fact with explicit
start and end times; nothing in the engine thread waits on tracing.
"""

from __future__ import annotations

import time
from typing import Any

from prefix.serve.access_log import RequestLog

TRACER_NAME = "cachegate.engine"


class EngineTracing:
    """``on_finish`` hook of :class:`RequestLog`: the request's spans."""

    def __init__(self, provider: Any) -> None:
        self.tracer = provider.get_tracer(TRACER_NAME)

    def __call__(self, log: RequestLog, status: int | str) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        end = time.perf_counter()
        offset = time.time_ns() - time.perf_counter_ns()

        def ns(t: float) -> int:
            return int(t * 1e9) + offset

        carrier = {"traceparent": log.traceparent} if log.traceparent else {}
        parent = TraceContextTextMapPropagator().extract(carrier)
        root = self.tracer.start_span(
            f"POST {log.path}",
            context=parent,
            kind=SpanKind.SERVER,
            start_time=ns(log.started),
            attributes=_attributes(log, status),
        )
        if isinstance(status, int) and status >= 500:
            root.set_status(Status(StatusCode.ERROR))
        inside = trace.set_span_in_context(root)
        out = log.last
        if out is not None and out.arrival_at is not None:
            first_token = None if out.ttft_s is None else out.arrival_at + out.ttft_s
            scheduled = out.scheduled_at
            steps = [
                ("queue", out.arrival_at, scheduled or end),
                ("prefill", scheduled, first_token or end),
                ("decode", first_token, end),
            ]
            for name, start, stop in steps:
                if start is not None:
                    child = self.tracer.start_span(name, context=inside, start_time=ns(start))
                    child.end(end_time=ns(max(start, stop)))
        root.end(end_time=ns(end))


def _attributes(log: RequestLog, status: int | str) -> dict[str, Any]:
    values: dict[str, Any] = {
        "http.request.method": "POST",
        "url.path": log.path,
        "cachegate.request_id": log.request_id,
        "cachegate.namespace_id": log.namespace_id,
    }
    if isinstance(status, int):
        values["http.response.status_code"] = status
    out = log.last
    if out is not None:
        values |= {
            "cachegate.prompt_tokens": out.prompt_tokens,
            "cachegate.cached_tokens": out.cached_tokens,
            "cachegate.completion_tokens": out.completion_tokens,
        }
    return values
