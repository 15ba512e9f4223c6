"""Access lines as JSON: one per request through a real gateway (in-process SmolLM2, the
real embedder, SQLite) and one per request on a real engine server, parsed back;
prompt and answer text only when content logging is on."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import Components
from gateway.logging_setup import JsonFormatter, configure_logging
from gateway.metrics import tenant_label
from gateway.settings import Settings
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from prefix.serve.server import create_engine_app
from semantic import Embedder
from tests.gateway.conftest import (
    chat_body,
    content,
    gateway_settings,
    running_gateway,
    smol_engine,
)
from tests.live_server import serving

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
QUESTION = "What is the capital of France?"
FIELDS = {
    "request_id",
    "tenant",
    "endpoint",
    "outcome",
    "semantic",
    "score",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "ttft_ms",
    "duration_ms",
    "status",
    "stream",
}


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """Everything logged while the test runs, as the CLI configures it for json."""
    buf = io.StringIO()
    configure_logging(Settings(_env_file=None, log_format="json"), stream=buf)
    try:
        yield buf
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if getattr(h, "_cachegate", False)]:
            root.removeHandler(handler)
        logging.getLogger("cachegate").setLevel(logging.NOTSET)


def records(buf: io.StringIO, logger: str) -> list[dict[str, Any]]:
    """Every line parses as JSON; those of ``logger``."""
    parsed = [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]
    return [r for r in parsed if r["logger"] == logger]


DIGESTS: dict[str, str] = {}


def hit_and_miss(
    tmp_path: Path, loaded: LoadedModel, embedder: Embedder, **settings: Any
) -> tuple[str, list[httpx.Response]]:
    """A miss (stored), the same question again streamed (a semantic hit), a bad key;
    the tenant id and (in ``DIGESTS``) its metrics label."""
    parts = Components(engine=smol_engine(loaded), embedder=embedder)
    with running_gateway(gateway_settings(tmp_path, **settings), parts) as gw:
        tenant, key = gw.tenant("logs")
        DIGESTS[tenant] = gw.state.metrics.digest(tenant)
        with gw.http(key) as http:
            miss = http.post(CHAT, json=chat_body(gw.model, QUESTION))
            hit = http.post(CHAT, json=chat_body(gw.model, QUESTION, stream=True))
        with gw.http("cg-not-a-key") as http:
            denied = http.post(CHAT, json=chat_body(gw.model, QUESTION))
    assert miss.status_code == 200 and miss.headers["x-cachegate-backfill"] == "stored"
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    assert denied.status_code == 401
    return tenant, [miss, hit, denied]


def test_one_json_line_per_request_without_text(
    tmp_path: Path, smol_loaded: LoadedModel, embedder: Embedder, log_lines: io.StringIO
) -> None:
    tenant, (miss, hit, _denied) = hit_and_miss(tmp_path, smol_loaded, embedder)
    lines = records(log_lines, "cachegate.gateway.access")
    assert len(lines) == 3, lines
    for line in lines:
        assert set(line) >= FIELDS, line
        assert line["endpoint"] == CHAT
        assert "prompt" not in line and "answer" not in line
    first, second, third = lines
    assert first["request_id"] == miss.headers["x-request-id"]
    # The metrics' keyed digest: not the plain hash a guessed id would give.
    assert first["tenant"] == DIGESTS[tenant] not in (tenant, tenant_label(tenant))
    assert first["outcome"] == "miss" and first["status"] == 200 and first["stream"] is False
    assert first["semantic"].startswith("miss:") and first["score"] is None
    assert first["prompt_tokens"] == miss.json()["usage"]["prompt_tokens"]
    assert first["completion_tokens"] == miss.json()["usage"]["completion_tokens"]
    assert first["ttft_ms"] > 0 and first["duration_ms"] >= first["ttft_ms"]
    assert second["request_id"] == hit.headers["x-request-id"]
    assert second["outcome"] == "semantic-hit" and second["semantic"] == "hit"
    assert second["stream"] is True and second["score"] > 0.99
    assert second["cached_tokens"] == second["prompt_tokens"] > 0
    assert third["outcome"] == "error" and third["status"] == 401 and third["tenant"] is None
    # No line of any logger carries the question or the answer.
    everything = log_lines.getvalue()
    assert QUESTION not in everything
    assert content(miss).strip() and content(miss).strip() not in everything


def test_content_logging_is_an_operator_choice(
    tmp_path: Path, smol_loaded: LoadedModel, embedder: Embedder, log_lines: io.StringIO
) -> None:
    tenant, (miss, _hit, _denied) = hit_and_miss(
        tmp_path, smol_loaded, embedder, log_content=True, log_tenant_ids=True
    )
    first, second, third = records(log_lines, "cachegate.gateway.access")
    assert first["tenant"] == tenant
    assert QUESTION in first["prompt"] and first["answer"] == content(miss)
    assert QUESTION in second["prompt"] and second["answer"] == content(miss)
    assert third["prompt"] is None and third["answer"] is None


def test_engine_server_access_line_is_json(tiny_llama: LoadedModel, log_lines: io.StringIO) -> None:
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=64), loaded=tiny_llama)
    with serving(create_engine_app(engine, served_model_name="tiny")) as url:
        body = {"model": "tiny", "prompt": "t5 t6 t7 t8 t9", "max_tokens": 3, "temperature": 0}
        r = httpx.post(f"{url}/v1/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    (line,) = records(log_lines, "cachegate.access")
    assert line["request_id"] == r.headers["x-request-id"] and line["status"] == 200
    assert line["prompt_tokens"] == r.json()["usage"]["prompt_tokens"]
    assert line["completion_tokens"] == 3 and line["path"] == "/v1/completions"
    assert "t5 t6" not in log_lines.getvalue()


def test_json_formatter_keeps_extra_fields_and_survives_odd_values() -> None:
    record = logging.LogRecord("cachegate.x", logging.WARNING, "f.py", 1, "n=%d", (3,), None)
    record.__dict__.update({"path": Path("/tmp/a"), "count": 2})
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "n=3" and line["level"] == "WARNING"
    assert line["logger"] == "cachegate.x" and line["count"] == 2 and line["path"] == "/tmp/a"
    assert "args" not in line and "msg" not in line
