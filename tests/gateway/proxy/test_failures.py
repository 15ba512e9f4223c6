"""Failure behaviour over real sockets: the upstream down, silent or breaking
mid-stream, and the database going away under a running gateway.

A real engine server (``prefix.serve.server``) over SmolLM2 answers the first
gateway, which backfills a shared SQLite file; later gateways over the same
file have broken upstreams (a closed port, a listener that never answers, one
that breaks off), so semantic hits are still served from what was stored.
The database outage runs the gateway on PostgreSQL through a TCP forwarder
that the test stops and restarts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import Components
from gateway.proxy.http_upstream import HttpUpstream
from prefix.model.loader import LoadedModel
from prefix.serve.server import create_engine_app
from semantic import Embedder
from tests.gateway.conftest import (
    LONG_SYSTEM,
    Gateway,
    assert_openai_error,
    cached_tokens,
    chat_body,
    content,
    gateway_settings,
    metric,
    running_gateway,
    smol_engine,
    sse_payloads,
)
from tests.gateway.failure_peers import RawUpstream, TcpForwarder, closed_port
from tests.live_server import serving

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
ENGINE_KEY = "gateway-tests-engine-key"
MODEL = "smollm2"
QUESTION = "What is the capital of France?"
PARAPHRASE = "Which city is the capital of France?"  # similarity 0.94
NEW_QUESTION = "Who wrote Romeo and Juliet?"
FAST = 5.0  # seconds: a failing request must answer well before this


# ----------------------------------------------------------------- a seeded database


@dataclass(frozen=True)
class Seeded:
    data_dir: Path
    tenant: str
    key: str
    answer: str


@pytest.fixture(scope="module")
def engine_url(smol_loaded: LoadedModel) -> Iterator[str]:
    """Our engine as a real OpenAI-compatible server (uvicorn)."""
    app = create_engine_app(
        smol_engine(smol_loaded), served_model_name=MODEL, trusted_key=ENGINE_KEY
    )
    with serving(app) as url:
        yield url


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway-failures")


@pytest.fixture(scope="module")
def http_gw(engine_url: str, embedder: Embedder, data_dir: Path) -> Iterator[Gateway]:
    """A gateway whose upstream is the engine server over HTTP."""
    upstream = HttpUpstream(engine_url, model=MODEL, engine_key=ENGINE_KEY)
    with running_gateway(
        gateway_settings(data_dir), Components(upstream=upstream, embedder=embedder)
    ) as gw:
        yield gw


@pytest.fixture(scope="module")
def seeded(http_gw: Gateway, data_dir: Path) -> Seeded:
    """One answer stored in the shared SQLite file through a working upstream."""
    tenant, key = http_gw.tenant("seed")
    with http_gw.http(key) as http:
        r = http.post(CHAT, json=chat_body(MODEL, QUESTION))
    assert r.status_code == 200, r.text
    assert r.headers["x-cachegate-backfill"] == "stored"
    return Seeded(data_dir, tenant, key, content(r))


def broken_gateway(seeded: Seeded, embedder: Embedder, upstream: HttpUpstream) -> Any:
    """Another gateway over the seeded file, with a broken upstream."""
    settings = gateway_settings(seeded.data_dir)
    return running_gateway(settings, Components(upstream=upstream, embedder=embedder))


def timed_post(http: httpx.Client, body: dict[str, Any]) -> tuple[httpx.Response, float]:
    start = time.monotonic()
    r = http.post(CHAT, json=body)
    return r, time.monotonic() - start


# ----------------------------------------------------------------- HTTP upstream working


def test_http_upstream_streams_backfills_and_keeps_tenant_namespaces(
    http_gw: Gateway, seeded: Seeded
) -> None:
    with http_gw.http(seeded.key) as http:
        hit = http.post(CHAT, json=chat_body(MODEL, PARAPHRASE))
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    assert content(hit) == seeded.answer

    # A miss streamed through the HTTP upstream, as the openai client sees it.
    _, key_a = http_gw.tenant("http-a")
    stream = http_gw.openai(key_a).chat.completions.create(
        model=MODEL,
        messages=chat_body(MODEL, "Are transfers instant?", LONG_SYSTEM)["messages"],
        max_tokens=6,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip()
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"

    # The tenant's namespace travels as a trusted header: A reuses A's blocks, B does not.
    _, key_b = http_gw.tenant("http-b")
    body = chat_body(MODEL, "How do disputes work?", LONG_SYSTEM, 4)
    with http_gw.http(key_a) as a, http_gw.http(key_b) as b:
        a_reused = cached_tokens(a.post(CHAT, json=body))
        b_cold = b.post(CHAT, json=body)
    assert a_reused >= 64
    assert cached_tokens(b_cold) == 0 and b_cold.headers["x-cachegate-cache"] == "miss"


def test_http_upstream_without_engine_key_still_isolates_tenants(
    engine_url: str, embedder: Embedder, tmp_path: Path
) -> None:
    """No trusted header: every tenant lands in the engine's "default" namespace, yet the
    gateway's per-tenant cache_salt still keeps their prefix blocks apart."""
    upstream = HttpUpstream(engine_url, model=MODEL, salt="server-secret")
    with running_gateway(
        gateway_settings(tmp_path), Components(upstream=upstream, embedder=embedder)
    ) as gw:
        _, key_a = gw.tenant("nokey-a")
        _, key_b = gw.tenant("nokey-b")
        body = chat_body(MODEL, "Can I freeze my card online?", LONG_SYSTEM, 4)
        with gw.http(key_a) as a, gw.http(key_b) as b:
            a.post(CHAT, json=body)
            a_again = cached_tokens(a.post(CHAT, json=body))  # positive control
            b_first = cached_tokens(b.post(CHAT, json=body))
        assert a_again >= 64
        assert b_first == 0


# ----------------------------------------------------------------- upstream down


def test_upstream_down_serves_hits_and_fails_misses_fast(
    seeded: Seeded, embedder: Embedder
) -> None:
    upstream = HttpUpstream(
        f"http://127.0.0.1:{closed_port()}", model=MODEL, retries=1, connect_timeout=0.5
    )
    with broken_gateway(seeded, embedder, upstream) as gw, gw.http(seeded.key, 30) as http:
        hit, elapsed = timed_post(http, chat_body(MODEL, PARAPHRASE))
        assert hit.status_code == 200, hit.text
        assert hit.headers["x-cachegate-cache"] == "semantic-hit"
        assert content(hit) == seeded.answer

        miss, elapsed = timed_post(http, chat_body(MODEL, NEW_QUESTION))
        err = assert_openai_error(miss, 502, "upstream_error")
        assert err["code"] == "upstream_unreachable"
        assert elapsed < FAST, elapsed

        streamed, elapsed = timed_post(http, chat_body(MODEL, NEW_QUESTION, stream=True))
        assert_openai_error(streamed, 502, "upstream_error")  # failed before the first byte
        assert elapsed < FAST, elapsed

        hit_stream = http.post(CHAT, json=chat_body(MODEL, PARAPHRASE, stream=True))
        assert hit_stream.status_code == 200
        replayed = sse_payloads(hit_stream.text)
        assert "".join(p["choices"][0]["delta"].get("content", "") for p in replayed) == (
            seeded.answer
        )

        ready = httpx.get(f"{gw.url}/ready", timeout=10)
        assert ready.status_code == 503
        assert ready.json()["checks"] == {
            "upstream": False,
            "database": True,
            "semantic_store": True,
            "verifier_loaded": True,
        }
        assert metric(gw.metrics(), "cachegate_upstream_errors_total", kind="UpstreamError") == 2


def test_upstream_timing_out_is_a_quick_504(seeded: Seeded, embedder: Embedder) -> None:
    with RawUpstream("silent") as silent:
        upstream = HttpUpstream(
            silent.url, model=MODEL, retries=1, connect_timeout=0.5, read_timeout=1.0
        )
        with broken_gateway(seeded, embedder, upstream) as gw, gw.http(seeded.key, 30) as http:
            hit, _ = timed_post(http, chat_body(MODEL, PARAPHRASE))
            assert hit.headers["x-cachegate-cache"] == "semantic-hit"

            for body in (
                chat_body(MODEL, NEW_QUESTION),
                chat_body(MODEL, NEW_QUESTION, stream=True),
            ):
                r, elapsed = timed_post(http, body)
                assert_openai_error(r, 504, "upstream_error")
                assert 0.9 <= elapsed < FAST, elapsed  # the read timeout, not a hang
            assert (
                metric(gw.metrics(), "cachegate_upstream_errors_total", kind="UpstreamTimeoutError")
                == 2
            )


# A 500 keeps its status (relay.py: 500, 502 and 504 are relayed as they are).
@pytest.mark.parametrize(("mode", "status"), [("hangup", 502), ("error-stall", 500)])
def test_upstream_failing_before_an_answer_is_a_5xx(
    seeded: Seeded, embedder: Embedder, mode: str, status: int
) -> None:
    with RawUpstream(mode) as peer:
        upstream = HttpUpstream(
            peer.url, model=MODEL, retries=1, connect_timeout=0.5, read_timeout=1.0
        )
        with broken_gateway(seeded, embedder, upstream) as gw, gw.http(seeded.key, 30) as http:
            for body in (
                chat_body(MODEL, NEW_QUESTION),
                chat_body(MODEL, NEW_QUESTION, stream=True),
            ):
                r, elapsed = timed_post(http, body)
                assert_openai_error(r, status, "upstream_error")
                assert elapsed < FAST, elapsed


@pytest.mark.parametrize(("mode", "status"), [("stall", 504), ("cut", 502)])
def test_upstream_breaking_mid_stream(
    seeded: Seeded, embedder: Embedder, mode: str, status: int
) -> None:
    with RawUpstream(mode) as peer:
        upstream = HttpUpstream(
            peer.url, model=MODEL, retries=0, connect_timeout=0.5, read_timeout=1.0
        )
        with broken_gateway(seeded, embedder, upstream) as gw, gw.http(seeded.key, 30) as http:
            entries = gw.cache.entries.count(tenant=seeded.tenant)
            body = chat_body(MODEL, NEW_QUESTION)
            # Not streamed: nothing was sent yet, so the client gets a plain error status.
            r, elapsed = timed_post(http, body)
            assert_openai_error(r, status, "upstream_error")
            assert elapsed < FAST, elapsed
            # Streamed: the first token went out, so the stream ends with an error event.
            r, elapsed = timed_post(http, body | {"stream": True})
            assert r.status_code == 200 and elapsed < FAST
            payloads = sse_payloads(r.text)
            # The upstream's chunk is passed through as it came (this one has no role).
            assert payloads[0]["choices"][0]["delta"] == {"content": "Paris"}
            assert payloads[-1]["error"]["type"] == "upstream_error"
            # A broken answer is never backfilled.
            assert gw.cache.entries.count(tenant=seeded.tenant) == entries
            kind = "UpstreamTimeoutError" if mode == "stall" else "UpstreamError"
            assert metric(gw.metrics(), "cachegate_upstream_errors_total", kind=kind) == 2
            assert gw.semantic_verdict(seeded.tenant, body) == "below_threshold"


# ----------------------------------------------------------------- database outage


@pytest.mark.postgres
def test_database_outage_fails_open_and_recovers(
    pg_schema: str, smol_loaded: LoadedModel, embedder: Embedder, tmp_path: Path
) -> None:
    with TcpForwarder(("127.0.0.1", 5432)) as db:
        url = (
            f"postgresql+psycopg://postgres@127.0.0.1:{db.port}/test"
            f"?options=-csearch_path%3D{pg_schema}"
        )
        settings = gateway_settings(tmp_path, url)
        parts = Components(engine=smol_engine(smol_loaded), embedder=embedder)
        with running_gateway(settings, parts) as gw:
            _, key = gw.tenant("pg")
            gw.tenants.cache_seconds = 0.0  # every request asks the DB for its key
            model = gw.model
            with gw.http(key, 30) as http:
                first = http.post(CHAT, json=chat_body(model, QUESTION))
                assert first.headers["x-cachegate-backfill"] == "stored"
                # The feed's replay of that store forgets the row and keeps it again only
                # if the memo held it: a replay racing the hit's own read drops both puts
                # (EntryMemo.put), and nothing is left in memory (a flake of a loaded
                # make test, session 47). Let it land first.
                assert gw.app.state.sync.wait_until_caught_up(10)
                control = http.post(CHAT, json=chat_body(model, PARAPHRASE))
                assert control.headers["x-cachegate-cache"] == "semantic-hit"
                assert httpx.get(f"{gw.url}/ready", timeout=10).status_code == 200

                db.stop()
                # The row the hit read a moment ago is in the store's memo: nobody can change
                # it while the database is down, so it is still served, from memory.
                kept = http.post(CHAT, json=chat_body(model, PARAPHRASE))
                assert kept.headers["x-cachegate-cache"] == "semantic-hit"
                assert content(kept) == content(first)
                gw.cache.entries.memo.clear()  # as when its 10 s are up: fail open to the engine
                down, elapsed = timed_post(http, chat_body(model, PARAPHRASE))
                assert down.status_code == 200, down.text
                assert down.headers["x-cachegate-semantic"] == "skipped:store_unavailable"
                assert down.headers["x-cachegate-cache"] != "semantic-hit"
                assert down.json()["usage"]["completion_tokens"] >= 1
                assert elapsed < 30, elapsed
                fresh, elapsed = timed_post(http, chat_body(model, NEW_QUESTION))
                assert fresh.status_code == 200, fresh.text
                # the store failed moments ago: the layer rests instead of asking again
                assert fresh.headers["x-cachegate-semantic"] == "skipped:store_unavailable"
                assert "stored" not in fresh.headers.get("x-cachegate-backfill", "")
                assert elapsed < 30, elapsed
                ready = httpx.get(f"{gw.url}/ready", timeout=30)
                assert ready.status_code == 503
                checks = ready.json()["checks"]
                assert checks["database"] is False and checks["semantic_store"] is False
                assert checks["upstream"] is True
                assert metric(gw.metrics(), "cachegate_semantic_store_unavailable_total") >= 2

                db.start()  # back on the same port: recovers without a restart
                ready = httpx.get(f"{gw.url}/ready", timeout=30)
                assert ready.status_code == 200, ready.text
                assert ready.json()["checks"]["semantic_store"] is True
                back = http.post(CHAT, json=chat_body(model, PARAPHRASE))
                assert back.headers["x-cachegate-cache"] == "semantic-hit"
                assert content(back) == content(first)
                stored = http.post(CHAT, json=chat_body(model, NEW_QUESTION))
                assert stored.headers["x-cachegate-backfill"] == "stored"
