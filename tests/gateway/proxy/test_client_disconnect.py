"""Clients that leave before their answer has started, over real sockets.

uvicorn and Starlette notice a disconnect only while a streamed body is being sent;
before that the gateway waits on the engine (a request queued, or a whole
non-streamed answer) with nothing listening, and an abandoned request ran to
``max_tokens`` holding its engine slot, its KV blocks and its queue place
(``gateway/proxy/disconnect.py`` now cancels it). The engine is the tiny random
Llama with each step slowed, so a 150-token answer takes ~5 s and a client that
gives up after 0.5 s has left long before it ends.

Also here: the access line and ``cachegate_client_disconnects_total`` for a client
that left (``gateway/request_log.py``), and a replica in its cooldown marked up
again by a streamed answer (``gateway/proxy/engine_pool.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import Components
from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from prefix.serve.server import create_engine_app
from tests.gateway.conftest import Gateway, gateway_settings, metric, running_gateway, wait_until
from tests.gateway.pool_peers import ENGINE_KEY, MODEL, FakeClock, make_pool, with_chat_template
from tests.gateway.pool_peers import words as pool_words
from tests.live_server import serving

STEP_DELAY = 0.03  # seconds before each engine step: 150 tokens take ~5 s
LONG = 150  # max_tokens of an answer the client gives up on
GIVE_UP = 0.5  # the client's read timeout: well before the long answer's first byte
PROMPT_SECRET = "zebra-marker"  # client text: never in an access line


def slow_engine(loaded: LoadedModel, **config: Any) -> PrefixEngine:
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=128, **config), loaded=loaded)
    step = engine.step

    def slowed() -> Any:
        time.sleep(STEP_DELAY)
        return step()

    engine.step = slowed  # type: ignore[method-assign]
    return engine


def idle(engine: PrefixEngine) -> bool:
    return not engine.has_unfinished() and engine.pool.num_used_blocks == 0


def words(n: int, start: int = 0) -> str:
    return " ".join(f"t{3 + (start + i) % 125}" for i in range(n))


class AccessLines(logging.Handler):
    """The access lines logged while attached (their messages and structured fields)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def outcomes(self, tenant_digest: str) -> list[tuple[str, int]]:
        rows = [r for r in self.records if getattr(r, "tenant", None) == tenant_digest]
        return [(getattr(r, "outcome", ""), getattr(r, "status", 0)) for r in rows]


@dataclass
class Served:
    gw: Gateway
    engine: PrefixEngine
    lines: AccessLines


@pytest.fixture(scope="module")
def served(tiny_llama: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A gateway over the slowed engine in-process: one request runs, one may wait."""
    engine = slow_engine(tiny_llama, max_num_seqs=1, max_num_waiting=1)
    settings = gateway_settings(
        tmp_path_factory.mktemp("disconnect"),
        semantic_enabled=False,
        max_num_seqs=1,
        max_num_waiting=1,
    )
    lines = AccessLines()
    access = logging.getLogger("cachegate.gateway.access")
    level = access.level
    access.addHandler(lines)
    access.setLevel(logging.INFO)
    try:
        with running_gateway(settings, Components(engine=engine)) as gw:
            yield Served(gw, engine, lines)
    finally:
        access.removeHandler(lines)
        access.setLevel(level)


def body(gw: Gateway, start: int, max_tokens: int = LONG, **extra: Any) -> dict[str, Any]:
    return {
        "model": gw.model,
        "prompt": f"{PROMPT_SECRET} {words(10, start)}",
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
    } | extra


def give_up(gw: Gateway, key: str, payload: dict[str, Any]) -> float:
    """Send ``payload`` and leave after GIVE_UP seconds without a byte; when it left."""
    headers = {"Authorization": f"Bearer {key}"}
    try:
        with httpx.stream(
            "POST", f"{gw.url}/v1/completions", json=payload, headers=headers, timeout=GIVE_UP
        ) as r:
            for _ in r.iter_bytes():
                pass
    except httpx.TimeoutException:
        return time.monotonic()
    raise AssertionError("the answer came before the client gave up")


def test_a_non_streamed_request_is_aborted_when_its_client_leaves(served: Served) -> None:
    gw, engine = served.gw, served.engine
    _, key = gw.tenant("nonstream")
    give_up(gw, key, body(gw, 0))
    # Aborted within a step or two; before, it ran to max_tokens (~5 s) with its blocks.
    assert wait_until(lambda: idle(engine), timeout=1.0), engine.num_running
    text = gw.metrics()
    assert metric(text, "prefix_num_requests_running") == 0
    assert metric(text, "prefix_num_requests_waiting") == 0
    assert metric(text, "prefix_cache_blocks_used") == 0
    engine.pool.check_integrity()


def test_a_queued_stream_whose_client_leaves_frees_its_queue_place(served: Served) -> None:
    gw, engine = served.gw, served.engine
    _, key = gw.tenant("queued")
    assert wait_until(lambda: idle(engine))
    status: list[int] = []
    with gw.http(key, timeout=30) as http:
        running = threading.Thread(
            target=lambda: status.append(http.post("/v1/completions", json=body(gw, 1)).status_code)
        )
        running.start()
        try:
            assert wait_until(lambda: engine.num_running == 1, timeout=5.0)
            # The only queue place: a streamed request that waits for the running one.
            give_up(gw, key, body(gw, 2, stream=True))
            assert wait_until(lambda: engine.num_waiting == 0, timeout=1.0)
            # Before, the abandoned one kept the place: this got 429 queue_full.
            r = http.post("/v1/completions", json=body(gw, 3, max_tokens=2))
            assert r.status_code == 200, r.text
        finally:
            running.join(30)
    assert status == [200]
    assert wait_until(lambda: idle(engine))
    engine.pool.check_integrity()


def test_disconnects_are_counted_and_logged_per_tenant(served: Served) -> None:
    gw, engine = served.gw, served.engine
    tenant, key = gw.tenant("counted")
    digest = gw.state.metrics.digest(tenant)
    assert wait_until(lambda: idle(engine))
    # Controls: answers read to their end are not disconnects (uvicorn also answers
    # http.disconnect to a receive() once a response has ended).
    with gw.http(key, timeout=30) as http:
        assert http.post("/v1/completions", json=body(gw, 4, max_tokens=3)).status_code == 200
        streamed = http.post("/v1/completions", json=body(gw, 5, max_tokens=3, stream=True))
        assert streamed.status_code == 200 and streamed.text.endswith("data: [DONE]\n\n")
    # The aborts have their own tests: waited for here with room, so that this test
    # fails on what it checks.
    give_up(gw, key, body(gw, 6))  # before the first byte
    assert wait_until(lambda: idle(engine), timeout=10.0)
    with (  # mid-stream: a few chunks read, then the connection closed
        gw.http(key, timeout=30) as http,
        http.stream("POST", "/v1/completions", json=body(gw, 7, stream=True)) as r,
    ):
        assert r.status_code == 200
        chunks = 0
        for line in r.iter_lines():
            chunks += line.startswith("data:")
            if chunks == 3:
                break
    assert wait_until(lambda: idle(engine), timeout=10.0)
    expected = [("miss", 200), ("miss", 200)] + [("client_disconnected", 499)] * 2
    assert wait_until(lambda: served.lines.outcomes(digest) == expected), served.lines.outcomes(
        digest
    )
    text = gw.metrics()
    assert metric(text, "cachegate_client_disconnects_total", tenant=tenant) == 2
    assert metric(text, "cachegate_requests_total", tenant=tenant) == 2  # the answered ones
    assert metric(text, "cachegate_upstream_errors_total") == 0  # a client leaving is none
    for record in served.lines.records:  # the client's text stays out of the log
        assert PROMPT_SECRET not in record.getMessage()
        assert PROMPT_SECRET not in str(vars(record))


# ----------------------------------------------------------------- over HTTP, one replica


@pytest.fixture(scope="module")
def slow_engine_server(tiny_llama: LoadedModel) -> Iterator[tuple[str, PrefixEngine]]:
    engine = slow_engine(with_chat_template(tiny_llama))
    app = create_engine_app(engine, served_model_name=MODEL, trusted_key=ENGINE_KEY)
    with serving(app) as url:
        yield url, engine


def test_over_http_the_gateway_leaves_the_upstream_when_its_client_leaves(
    slow_engine_server: tuple[str, PrefixEngine], tmp_path: Path
) -> None:
    url, engine = slow_engine_server
    pool = make_pool([url])
    settings = gateway_settings(tmp_path, semantic_enabled=False)
    with running_gateway(settings, Components(upstream=pool)) as gw:
        _, key = gw.tenant("http")
        payload = {"model": MODEL, "prompt": pool_words(10, 0), "max_tokens": LONG}
        give_up(gw, key, payload | {"temperature": 0, "ignore_eos": True})
        # The gateway closed its upstream connection, so the engine server's own
        # disconnect watcher aborted the request; before, it ran to max_tokens.
        assert wait_until(lambda: idle(engine), timeout=1.0), engine.num_running
    engine.pool.check_integrity()


def test_a_replica_in_its_cooldown_is_marked_up_by_a_streamed_answer(
    slow_engine_server: tuple[str, PrefixEngine], tmp_path: Path
) -> None:
    url, _ = slow_engine_server
    clock = FakeClock()
    pool = make_pool([url], clock, cooldown_seconds=30.0)
    settings = gateway_settings(tmp_path, semantic_enabled=False)
    with running_gateway(settings, Components(upstream=pool)) as gw:
        _, key = gw.tenant("cooldown")
        replica = pool.replicas[0]
        replica.down_until = clock.now + 30.0  # failed a moment ago; the only one, so tried
        payload = {"model": MODEL, "prompt": pool_words(10, 50), "max_tokens": 2, "stream": True}
        with gw.http(key, timeout=30) as http:
            r = http.post("/v1/completions", json=payload)
        assert r.status_code == 200 and r.text.endswith("data: [DONE]\n\n"), r.text
        # It answered: up again. Before, only a non-streamed answer (read past its Done)
        # marked it up; the streamed one closed the pool's generator at the Done.
        assert pool.replica_states()[0]["is_up"], pool.replica_states()
