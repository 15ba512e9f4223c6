"""A tenant's ``max_concurrent_requests`` (gateway/proxy/concurrency.py), over real sockets.

The engine is the tiny random Llama with each step slowed, so a 60-token stream takes
~2 s and two of them hold a tenant's two slots long enough to be seen. Every refusal
comes with its control: another tenant is served meanwhile, the same tenant once a slot
is back, and every way a request ends (its stream read to the end, an error answer, a
client that left) gives its slot back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.app import Components
from gateway.errors import RateLimitError
from gateway.policy import TenantPolicy
from gateway.proxy.concurrency import TenantConcurrency
from gateway.tenants import TenantContext
from prefix.model.loader import LoadedModel
from tests.gateway.conftest import Gateway, gateway_settings, metric, running_gateway, wait_until
from tests.gateway.proxy.test_client_disconnect import slow_engine

CAP = 2
LONG = 60  # max_tokens of a stream that holds its slot for ~2 s


def context(tenant_id: str, cap: int | None, namespace_id: str = "") -> TenantContext:
    policy = TenantPolicy(max_concurrent_requests=cap)
    return TenantContext(tenant_id, tenant_id, policy, 1, namespace_id=namespace_id)


def test_slots_are_counted_per_tenant_and_given_back_once() -> None:
    slots = TenantConcurrency()
    a, b = context("a", 2, "ns-a"), context("b", 2, "ns-b")
    held = [slots.acquire(a), slots.acquire(a)]
    with pytest.raises(RateLimitError) as refused:
        slots.acquire(a)
    assert refused.value.status == 429 and refused.value.code == "too_many_concurrent_requests"
    assert refused.value.headers == {"Retry-After": "1"}
    assert slots.acquire(b) is not None  # control: another tenant has its own slots
    assert slots.in_flight(a) == 2 and slots.refused(a) == 1 and slots.refused(b) == 0
    release = held[0]
    assert release is not None
    release()
    release()  # twice is once: a second call must not free another request's slot
    assert slots.in_flight(a) == 1
    assert slots.acquire(a) is not None  # the slot is back
    slots.check_integrity()
    # a tenant created again under the same id (another minted id) starts with none held
    assert slots.in_flight(context("a", 2, "ns-a2")) == 0
    assert slots.acquire(context("c", None)) is None  # no cap: nothing counted
    slots.check_integrity()


@pytest.fixture(scope="module")
def gw(tiny_llama: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    engine = slow_engine(tiny_llama, max_num_seqs=8)
    settings = gateway_settings(
        tmp_path_factory.mktemp("concurrency"), semantic_enabled=False, max_num_seqs=8
    )
    with running_gateway(settings, Components(engine=engine)) as gateway:
        yield gateway


def body(gw: Gateway, max_tokens: int = LONG, **extra: Any) -> dict[str, Any]:
    # ignore_eos: a stream that holds a slot must not end early on a sampled EOS
    prompt = {"model": gw.model, "prompt": "one two three", "ignore_eos": True}
    return prompt | {"max_tokens": max_tokens} | extra


def in_flight(gw: Gateway, key: str) -> int:
    slots: TenantConcurrency = gw.app.state.concurrency
    return slots.in_flight(gw.tenants.authenticate(key))


def stream_in_background(gw: Gateway, key: str) -> tuple[threading.Thread, list[int]]:
    """A long stream read to its end in a thread; its status lands in the list."""
    statuses: list[int] = []

    def run() -> None:
        with (
            gw.http(key) as client,
            client.stream("POST", "/v1/completions", json=body(gw, stream=True)) as r,
        ):
            statuses.append(r.status_code)
            for _ in r.iter_bytes():
                pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, statuses


def test_a_tenant_past_its_cap_is_refused_and_served_again_once_a_slot_is_back(
    gw: Gateway,
) -> None:
    _, key = gw.tenant("capped", TenantPolicy(max_concurrent_requests=CAP))
    _, other = gw.tenant("other", TenantPolicy(max_concurrent_requests=CAP))
    streams = [stream_in_background(gw, key) for _ in range(CAP)]
    assert wait_until(lambda: in_flight(gw, key) == CAP)
    with gw.http(key) as client:
        r = client.post("/v1/completions", json=body(gw, max_tokens=2))
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "too_many_concurrent_requests"
    assert r.json()["error"]["type"] == "rate_limit_error"
    assert r.headers["retry-after"] == "1"
    assert "x-ratelimit-limit-requests" not in r.headers  # no rate limit: none to tell
    # control: another tenant with the same cap is served meanwhile
    with gw.http(other) as client:
        assert client.post("/v1/completions", json=body(gw, max_tokens=2)).status_code == 200
    assert metric(gw.metrics(), "cachegate_concurrency_refused_total") >= 1
    for thread, statuses in streams:
        thread.join(timeout=60)
        assert statuses == [200]
    # each stream gave its slot back at its end (the server's call ends just after the
    # client has read the last event)
    assert wait_until(lambda: in_flight(gw, key) == 0)
    with gw.http(key) as client:
        assert client.post("/v1/completions", json=body(gw, max_tokens=2)).status_code == 200


def test_errors_and_clients_that_leave_give_their_slots_back(gw: Gateway) -> None:
    _, key = gw.tenant("leaving", TenantPolicy(max_concurrent_requests=1))
    with gw.http(key) as client:
        for _ in range(3):  # a 400 after the slot was taken, three times over a cap of 1
            r = client.post("/v1/completions", content=b'{"model": ')
            assert r.status_code == 400, r.text
    assert in_flight(gw, key) == 0
    # a stream whose client leaves after its first bytes
    with (
        gw.http(key) as client,
        client.stream("POST", "/v1/completions", json=body(gw, stream=True)) as r,
    ):
        assert r.status_code == 200
        chunks = r.iter_bytes()
        first = next(chunks)
        assert in_flight(gw, key) == 1, first
    assert wait_until(lambda: in_flight(gw, key) == 0)
    # a non-streamed request whose client gives up before the answer starts
    with gw.http(key, timeout=0.5) as client, pytest.raises(httpx.ReadTimeout):
        client.post("/v1/completions", json=body(gw))
    assert wait_until(lambda: in_flight(gw, key) == 0)
    started = time.monotonic()
    with gw.http(key) as client:
        assert client.post("/v1/completions", json=body(gw, max_tokens=2)).status_code == 200
    assert time.monotonic() - started < 30
    gw.app.state.concurrency.check_integrity()


def test_a_refused_request_spends_no_rate_limit_token(gw: Gateway) -> None:
    policy = TenantPolicy(max_concurrent_requests=1, rate_limit_rpm=2, rate_limit_tpm=100_000)
    _, key = gw.tenant("rpm", policy)
    thread, statuses = stream_in_background(gw, key)  # token 1 of 2, and the only slot
    assert wait_until(lambda: in_flight(gw, key) == 1)
    with gw.http(key) as client:
        for _ in range(3):
            r = client.post("/v1/completions", json=body(gw, max_tokens=2))
            assert r.json()["error"]["code"] == "too_many_concurrent_requests"
            # where the buckets stand, as on the tenant's other answers (session 48)
            assert r.headers["x-ratelimit-limit-requests"] == "2"
            assert r.headers["x-ratelimit-remaining-requests"] == "1"
            assert r.headers["x-ratelimit-limit-tokens"] == "100000"
            assert r.headers["retry-after"] == "1"
    thread.join(timeout=60)
    assert statuses == [200]
    with gw.http(key) as client:  # token 2 is still there
        assert client.post("/v1/completions", json=body(gw, max_tokens=2)).status_code == 200
        r = client.post("/v1/completions", json=body(gw, max_tokens=2))
    assert r.json()["error"]["code"] == "rate_limit_exceeded"  # control: the bucket counts
