"""Traces with the OpenTelemetry SDK's in-memory exporter: a real gateway whose upstream
is a real engine server over HTTP (SmolLM2), each with its own tracer provider as two
processes would have. One client trace runs through both; tracing off imports nothing."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from gateway.app import Components
from gateway.proxy.http_upstream import HttpUpstream
from prefix.model.loader import LoadedModel
from prefix.serve.server import create_engine_app
from semantic import Embedder
from tests.gateway.conftest import (
    Gateway,
    chat_body,
    gateway_settings,
    running_gateway,
    smol_engine,
    wait_until,
)
from tests.live_server import serving

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
MODEL = "smollm2"
KEY = "tracing-tests-engine-key"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"


def exporting() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture(scope="module")
def engine_spans(smol_loaded: LoadedModel) -> Iterator[tuple[str, InMemorySpanExporter]]:
    provider, exporter = exporting()
    app = create_engine_app(
        smol_engine(smol_loaded), served_model_name=MODEL, trusted_key=KEY, tracer_provider=provider
    )
    with serving(app) as url:
        yield url, exporter


@pytest.fixture(scope="module")
def traced_gw(
    engine_spans: tuple[str, InMemorySpanExporter],
    embedder: Embedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Gateway, InMemorySpanExporter]]:
    provider, exporter = exporting()
    upstream = HttpUpstream(engine_spans[0], model=MODEL, engine_key=KEY)
    parts = Components(upstream=upstream, embedder=embedder, tracer_provider=provider)
    settings = gateway_settings(tmp_path_factory.mktemp("tracing"))
    with running_gateway(settings, parts) as gw:
        yield gw, exporter


def one_trace(exporter: InMemorySpanExporter, count: int) -> list[ReadableSpan]:
    """The finished spans of trace TRACE_ID, once ``count`` of them have ended."""

    def spans() -> list[ReadableSpan]:
        return [s for s in exporter.get_finished_spans() if f"{_trace(s):032x}" == TRACE_ID]

    assert wait_until(lambda: len(spans()) >= count), [s.name for s in spans()]
    return spans()


def _trace(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


def by_name(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    names = [s.name for s in spans]
    assert len(names) == len(set(names)), names
    return {s.name: s for s in spans}


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def times(span: ReadableSpan) -> tuple[int, int]:
    assert span.start_time is not None and span.end_time is not None
    return span.start_time, span.end_time


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def test_one_trace_from_client_through_gateway_and_engine(
    traced_gw: tuple[Gateway, InMemorySpanExporter],
    engine_spans: tuple[str, InMemorySpanExporter],
) -> None:
    gw, gw_exporter = traced_gw
    _, engine_exporter = engine_spans
    _, key = gw.tenant("trace")
    headers = {"traceparent": TRACEPARENT}
    with gw.http(key) as http:
        r = http.post(CHAT, json=chat_body(MODEL, "Who wrote Hamlet?"), headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["x-cachegate-backfill"] == "stored"

    spans = by_name(one_trace(gw_exporter, 6))
    steps = ("auth", "semantic.lookup", "upstream", "backfill")
    assert set(spans) == {"POST /v1/chat/completions", "embed", *steps}
    root = spans["POST /v1/chat/completions"]
    assert root.kind is SpanKind.SERVER and parent_of(root) == int(CLIENT_SPAN, 16)
    for name in steps:
        assert parent_of(spans[name]) == span_id(root), name
    # The tenant's partition was empty: the lookup embedded nothing, the backfill did.
    assert parent_of(spans["embed"]) == span_id(spans["backfill"])
    attributes: Any = root.attributes
    assert attributes["cachegate.outcome"] == "miss"
    assert attributes["cachegate.request_id"] == r.headers["x-request-id"]

    # The engine continues the trace under the gateway's upstream span.
    engine = by_name(one_trace(engine_exporter, 4))
    assert set(engine) == {"POST /v1/chat/completions", "queue", "prefill", "decode"}
    served = engine["POST /v1/chat/completions"]
    assert served.kind is SpanKind.SERVER and parent_of(served) == span_id(spans["upstream"])
    for name in ("queue", "prefill", "decode"):
        assert parent_of(engine[name]) == span_id(served), name
    # One after the other: each step starts when the one before ends.
    queue, prefill, decode = (times(engine[n]) for n in ("queue", "prefill", "decode"))
    assert queue[0] < queue[1] == prefill[0] < prefill[1] == decode[0] <= decode[1]
    assert times(served)[0] <= queue[0] and decode[1] <= times(served)[1]
    tokens: Any = served.attributes
    assert tokens["cachegate.completion_tokens"] == r.json()["usage"]["completion_tokens"]


def test_semantic_hit_has_embed_search_validate_under_lookup(
    traced_gw: tuple[Gateway, InMemorySpanExporter],
) -> None:
    gw, exporter = traced_gw
    _, key = gw.tenant("trace-hit")
    with gw.http(key) as http:
        stored = http.post(CHAT, json=chat_body(MODEL, "What is the capital of France?"))
        assert stored.headers["x-cachegate-backfill"] == "stored"
        exporter.clear()
        hit = http.post(
            CHAT,
            json=chat_body(MODEL, "Which city is the capital of France?"),
            headers={"traceparent": TRACEPARENT},
        )
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    spans = one_trace(exporter, 6)
    names = sorted(s.name for s in spans)
    assert names == sorted(
        ["POST /v1/chat/completions", "auth", "semantic.lookup", "embed", "search", "validate"]
    ), names
    found = by_name(spans)
    lookup = found["semantic.lookup"]
    for name in ("embed", "search", "validate"):
        assert parent_of(found[name]) == span_id(lookup), name
    assert parent_of(lookup) == span_id(found["POST /v1/chat/completions"])


def test_tracing_off_imports_no_opentelemetry_sdk(tmp_path: Path) -> None:
    code = f"""
import sys
from pathlib import Path
from gateway.app import create_app
import prefix.serve.server
from tests.gateway.conftest import gateway_settings
create_app(gateway_settings(Path({str(tmp_path)!r})))
# (fastapi itself imports the opentelemetry API; the SDK and exporter are ours to import)
ours = ("opentelemetry.sdk", "opentelemetry.exporter")
assert not any(m.startswith(ours) for m in sys.modules), "imported while off"
from gateway.tracing import gateway_tracer
assert gateway_tracer(None) is None
assert gateway_tracer("http://127.0.0.1:4318") is not None  # positive control
assert "opentelemetry.sdk.trace" in sys.modules and "opentelemetry.exporter.otlp" in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
