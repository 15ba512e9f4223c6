"""Engine replicas behind the gateway (gateway/proxy/engine_pool.py), over real sockets:
three tiny engine servers, each with its own KV block pool, a TCP forwarder that
is stopped and restarted, closed ports, an engine that refuses work and raw TCP
peers that hang up or break off mid-stream.

Prefix reuse (``cached_tokens``) shows that routing works: a request only reuses
a prefix on the replica that computed it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from gateway.app import Components
from gateway.errors import BadRequestError, UpstreamError
from gateway.proxy.upstream import Delta
from prefix.model.loader import LoadedModel
from tests.gateway.conftest import assert_openai_error, gateway_settings, metric, running_gateway
from tests.gateway.failure_peers import RawUpstream, TcpForwarder, closed_port
from tests.gateway.pool_peers import (
    MODEL,
    FakeClock,
    ask,
    chat,
    completion,
    engine_replicas,
    find,
    make_pool,
    refusing_engine_app,
    state,
    with_chat_template,
    words,
)
from tests.live_server import serving

T = TypeVar("T")
SYSTEM = words(80, start=0)  # ~300 characters: longer than route_prefix_chars (256)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def tiny_chat(tiny_llama: LoadedModel) -> LoadedModel:
    return with_chat_template(tiny_llama)


@pytest.fixture(scope="module")
def replicas(tiny_chat: LoadedModel) -> Iterator[list[str]]:
    with engine_replicas(tiny_chat, 3) as urls:
        yield urls


# ----------------------------------------------------------------- (a) routing


def test_shared_prefixes_land_on_one_replica_and_are_reused(replicas: list[str]) -> None:
    async def main() -> None:
        pool = make_pool(replicas)
        try:
            served, cached = [], []
            for i in range(5):
                _, done = await ask(pool, chat(SYSTEM, words(3, start=40 + 7 * i)))
                served.append(done.extra["replica"])
                cached.append(done.cached_tokens)
            assert len(set(served)) == 1, served
            assert served[0] == pool.ring.preference(pool.key(chat(SYSTEM, "t5")))[0]
            assert cached[0] == 0 and all(c >= 76 for c in cached[1:]), cached  # 80 words reused
            # Different system prompts spread over the replicas.
            spread = set()
            for i in range(20):
                _, done = await ask(pool, chat(words(70, start=200 + 11 * i), "t9"))
                spread.add(done.extra["replica"])
            assert len(spread) > 1, spread
        finally:
            await pool.aclose()

    run(main())


# ----------------------------------------------------------------- (b) failover


def test_a_down_replica_is_failed_over_skipped_and_used_again(replicas: list[str]) -> None:
    host, port = replicas[0].removeprefix("http://").split(":")
    clock = FakeClock()
    with TcpForwarder((host, int(port))) as fwd:
        front = f"http://127.0.0.1:{fwd.port}"

        async def main() -> None:
            pool = make_pool([front, replicas[1], replicas[2]], clock, cooldown_seconds=5.0)
            try:
                [req] = find(pool, lambda i: chat(words(75, start=300 + i), "t7"), front)
                fallback = pool.ring.preference(pool.key(req))[1]
                assert (await ask(pool, req))[1].extra["replica"] == front  # positive control
                fwd.stop()
                _, done = await ask(pool, req)
                assert done.extra["replica"] == fallback and done.finish_reason
                down = state(pool, front)
                assert (down["is_up"], down["failures"], down["failovers"]) == (False, 1, 1)
                # Within the cooldown it is skipped, even once it listens again, and the
                # fallback reuses the prefix it cached on the failover.
                fwd.start()
                for _ in range(2):
                    _, done = await ask(pool, req)
                    assert done.extra["replica"] == fallback and done.cached_tokens > 0
                assert state(pool, front)["requests"] == 2
                clock.now += 5.1
                assert state(pool, front)["is_up"]
                assert (await ask(pool, req))[1].extra["replica"] == front
                assert state(pool, front)["requests"] == 3
            finally:
                await pool.aclose()

        run(main())


def test_refusals_before_the_first_byte_fail_over(replicas: list[str]) -> None:
    with serving(refusing_engine_app()) as refusing:

        async def main() -> None:
            pool = make_pool([refusing, replicas[0]])
            cases = [
                # 503 as the HTTP status, and "no free blocks" as the stream's first event.
                (refusing, lambda i: chat(words(70, start=500 + i), "t5")),
                (refusing, lambda i: completion(words(70, start=700 + i))),
            ]
            try:
                for bad, make in cases:
                    for replica in pool.replicas:
                        replica.down_until = 0.0  # every replica up for the next case
                    [req] = find(pool, make, bad)
                    failures = state(pool, bad)["failures"]
                    _, done = await ask(pool, req)
                    assert done.extra["replica"] == replicas[0]
                    assert state(pool, bad)["failures"] == failures + 1
                    assert not state(pool, bad)["is_up"]
                assert await pool.is_ready()  # some replica is
            finally:
                await pool.aclose()

        run(main())


def test_a_replica_that_read_the_request_and_hung_up_is_not_failed_over(
    replicas: list[str],
) -> None:
    """It may have run the request (a prompt that crashes an engine would crash every
    replica in turn): a 502 upstream_dropped, the replica marked down, so the client's
    retry goes to one that is up."""
    with RawUpstream("hangup") as raw:

        async def main() -> None:
            pool = make_pool([raw.url, replicas[0]])
            try:
                [req] = find(pool, lambda i: completion(words(70, start=900 + i)), raw.url)
                with pytest.raises(UpstreamError) as caught:
                    await ask(pool, req)
                assert caught.value.code == "upstream_dropped"
                assert len(raw.conns) == 1  # sent once, to it alone
                assert state(pool, raw.url)["failures"] == 1
                assert not state(pool, raw.url)["is_up"]
                _, done = await ask(pool, req)  # the retry
                assert done.extra["replica"] == replicas[0]
            finally:
                await pool.aclose()

        run(main())


# ----------------------------------------------------------------- (c) all down


def test_all_replicas_down_fails_fast_after_trying_each() -> None:
    urls = [f"http://127.0.0.1:{closed_port()}" for _ in range(3)]

    async def main() -> None:
        pool = make_pool(urls)
        try:
            for attempt in (1, 2):  # the second time all are marked down: tried anyway
                start = time.monotonic()
                with pytest.raises(UpstreamError, match="all 3 engine replicas failed"):
                    await ask(pool, completion("t5 t6"))
                assert time.monotonic() - start < 5.0
                assert [s["requests"] for s in pool.replica_states()] == [attempt] * 3
            assert not any(s["is_up"] for s in pool.replica_states())
            assert not await pool.is_ready()
        finally:
            await pool.aclose()

    run(main())


def test_gateway_fails_over_and_answers_502_when_all_are_down(
    replicas: list[str], tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{closed_port()}"
    settings = gateway_settings(tmp_path, semantic_enabled=False)
    pool = make_pool([dead, replicas[1]])
    with running_gateway(settings, Components(upstream=pool)) as gw:
        pool.bind_metrics(gw.state.metrics)
        _, key = gw.tenant("pool")
        sent = 0
        with gw.http(key, timeout=30) as http:
            while state(pool, dead)["failovers"] == 0:  # until one preferred the dead one
                assert sent < 30
                body = {"model": MODEL, "prompt": words(70, 40 * sent), "max_tokens": 2}
                r = http.post("/v1/completions", json=body)
                assert r.status_code == 200, r.text  # every request is answered
                sent += 1
        text = gw.metrics()
        # Replicas are labelled by their ordinal in the pool, never by URL (issue 14).
        assert metric(text, "cachegate_upstream_failovers_total", replica="0") == 1
        assert metric(text, "cachegate_upstream_requests_total", replica="1") == sent
        assert dead not in text and replicas[1] not in text
    all_dead = make_pool([dead, f"http://127.0.0.1:{closed_port()}"])
    with running_gateway(settings, Components(upstream=all_dead)) as gw:
        _, key = gw.tenant("pool-dead")
        with gw.http(key, timeout=30) as http:
            start = time.monotonic()
            r = http.post("/v1/completions", json={"model": MODEL, "prompt": "t5", "max_tokens": 2})
        assert_openai_error(r, 502, "upstream_error")
        assert time.monotonic() - start < 5.0


# ----------------------------------------------------------------- (d) and (e): no failover


def test_no_failover_after_the_first_byte(replicas: list[str]) -> None:
    with RawUpstream("cut") as raw:

        async def main() -> None:
            pool = make_pool([raw.url, replicas[0]])
            try:
                [req] = find(pool, lambda i: chat(words(70, start=i), "t5"), raw.url)
                seen: list[str] = []
                with pytest.raises(UpstreamError, match=r"stream broke|without a finish reason"):
                    async for event in pool.stream(req):
                        assert isinstance(event, Delta)
                        seen.append(event.text)
                assert seen == ["Paris"]  # one chunk, then the peer closed: not repeated
                assert state(pool, replicas[0])["requests"] == 0
                assert state(pool, raw.url)["failures"] == 1
            finally:
                await pool.aclose()

        run(main())


def test_client_errors_propagate_without_failover(replicas: list[str]) -> None:
    async def main() -> None:
        pool = make_pool(replicas)
        try:
            req = completion(words(70, start=3), max_tokens=1000)  # past the 256-token context
            with pytest.raises(BadRequestError) as info:
                await ask(pool, req)
            assert info.value.status == 400 and info.value.code == "context_length_exceeded"
            states = pool.replica_states()
            assert sorted(s["requests"] for s in states) == [0, 0, 1]
            assert all(s["is_up"] and s["failures"] == 0 for s in states)
        finally:
            await pool.aclose()

    run(main())


# ----------------------------------------------------------------- (f) tenants


def test_namespaces_spread_and_stay_isolated(replicas: list[str]) -> None:
    async def main() -> None:
        pool = make_pool(replicas)
        try:
            prompt = words(70, start=1000)
            owner = {ns: pool.order(completion(prompt, ns))[0].url for ns in map(str, range(30))}
            assert len(set(owner.values())) > 1  # one prompt, 30 tenants: spread
            a, b = _pair(owner)
            _, first = await ask(pool, completion(prompt, a))
            _, again = await ask(pool, completion(prompt, a))
            _, other = await ask(pool, completion(prompt, b))
            assert first.extra["replica"] == again.extra["replica"] == other.extra["replica"]
            assert (first.cached_tokens, other.cached_tokens) == (0, 0)
            assert again.cached_tokens > 0  # positive control: the same tenant reuses
        finally:
            await pool.aclose()

    run(main())


def _pair(owner: dict[str, str]) -> tuple[str, str]:
    """Two namespaces on the same replica (so only namespace isolation keeps them apart)."""
    for a in owner:
        for b in owner:
            if a != b and owner[a] == owner[b]:
                return a, b
    raise AssertionError(owner)


def test_ready_and_models(replicas: list[str]) -> None:
    async def main() -> None:
        pool = make_pool([f"http://127.0.0.1:{closed_port()}", replicas[0]])
        try:
            assert await pool.is_ready() and pool.models() == [MODEL]
        finally:
            await pool.aclose()

    run(main())


def other_model_app() -> Any:
    """An engine serving another model: a request for ours is its 404 (as vLLM answers
    a model it does not serve), and a 400 for what no replica would take."""
    app = FastAPI()
    missing = {"error": {"message": "The model does not exist.", "type": "NotFoundError",
                         "param": None, "code": 404}}  # fmt: skip

    @app.post("/v1/chat/completions")
    async def chat() -> Any:
        return JSONResponse(missing, status_code=404)

    return app


def test_a_replica_without_the_model_passes_the_request_on(replicas: list[str]) -> None:
    # A pool whose replicas serve different models lists them as one, so a request can
    # hash to a replica that lacks its model: its 404 was sent back to the client (a
    # review, session 44); the next replica answers, and the first is not marked down.
    with serving(other_model_app()) as other:

        async def main() -> None:
            pool = make_pool([other, replicas[0]])
            try:
                [req] = find(pool, lambda i: chat(words(70, start=900 + i), "t5"), other)
                _, done = await ask(pool, req)
                assert done.extra["replica"] == replicas[0]
                assert state(pool, other)["is_up"]
                alone = make_pool([other])  # the control: the only replica's 404 is sent
                try:
                    with pytest.raises(BadRequestError) as refused:
                        await ask(alone, req)
                    assert refused.value.status == 404
                finally:
                    await alone.aclose()
            finally:
                await pool.aclose()

        run(main())
