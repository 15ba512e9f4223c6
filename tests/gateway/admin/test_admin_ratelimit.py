"""Per-tenant rate limits (policy.rate_limit_rpm): the token bucket on a fake clock,
then through a live gateway: 429 with Retry-After, other tenants unaffected,
allowed again once the bucket refills, and a policy change applied at once."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway.errors import RateLimitError
from gateway.policy import TenantPolicy
from gateway.proxy.ratelimit import RateLimiter
from gateway.tenants import TenantContext
from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.admin_support import admin, admin_gateway, completion, new_tenant
from tests.gateway.conftest import Gateway, assert_openai_error


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ctx(tenant: str, rpm: int | None) -> TenantContext:
    return TenantContext(tenant, tenant, TenantPolicy(rate_limit_rpm=rpm), 1)


def limits(r: httpx.Response) -> tuple[str | None, ...]:
    """The tenant's x-ratelimit-{limit,remaining,reset}-requests headers."""
    return tuple(
        r.headers.get(f"x-ratelimit-{n}-requests") for n in ("limit", "remaining", "reset")
    )


def refused(limiter: RateLimiter, context: TenantContext) -> int:
    """The Retry-After seconds of a refused request (fails if it was allowed)."""
    with pytest.raises(RateLimitError) as info:
        limiter.check(context)
    err = info.value
    assert err.status == 429 and err.type == "rate_limit_error"
    assert err.code == "rate_limit_exceeded"
    return int(err.headers["Retry-After"])


def test_bucket_bursts_then_refills_at_rpm_per_minute() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock)
    a = ctx("a", 3)
    for _ in range(3):
        limiter.check(a)  # a burst of rpm requests
    assert refused(limiter, a) == 20  # one token every 60/3 s
    clock.now += 19.5
    assert refused(limiter, a) == 1  # 0.5 s to go: rounded up, never 0
    clock.now += 0.5
    limiter.check(a)
    assert refused(limiter, a) == 20
    assert limiter.refused("a") == 3
    clock.now += 3600  # a long idle time refills only up to rpm
    for _ in range(3):
        limiter.check(a)
    assert refused(limiter, a) >= 1


def test_tenants_have_their_own_buckets_and_no_limit_means_none() -> None:
    limiter = RateLimiter(FakeClock())
    limiter.check(ctx("a", 1))
    refused(limiter, ctx("a", 1))
    limiter.check(ctx("b", 1))  # b is not affected by a
    for _ in range(1000):
        limiter.check(ctx("c", None))
    assert limiter.refused("b") == 0 and limiter.refused("c") == 0


def test_refusals_are_counted_per_incarnation_of_a_tenant() -> None:
    # A tenant created again under a deleted one's id showed the old one's count on the
    # replicas that did not run the delete (an admin review).
    limiter = RateLimiter(FakeClock())
    old = TenantContext("a", "a", TenantPolicy(rate_limit_rpm=1), 1, namespace_id="m" * 32)
    limiter.check(old)
    refused(limiter, old)
    refused(limiter, old)
    assert limiter.refused("a", "m" * 32) == 2  # control: the incarnation's own count
    assert limiter.refused("a", "n" * 32) == 0  # the new one under the same id: none
    limiter.forget("a", "m" * 32)
    assert limiter.refused("a", "m" * 32) == 0


def test_policy_change_resizes_the_bucket() -> None:
    clock = FakeClock()
    limiter = RateLimiter(clock)
    for _ in range(60):
        limiter.check(ctx("a", 60))
    assert refused(limiter, ctx("a", 60)) == 1
    limiter.check(ctx("a", None))  # limit removed: allowed, bucket dropped
    for _ in range(5):
        limiter.check(ctx("a", 5))  # a fresh bucket of the new size
    assert refused(limiter, ctx("a", 5)) == 12
    limiter.forget("a")
    assert limiter.refused("a") == 0
    limiter.check(ctx("a", 5))


# ----------------------------------------------------------------- through the gateway


@pytest.fixture(scope="module")
def gw(
    tiny_llama: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    with admin_gateway(tmp_path_factory.mktemp("admin-rate"), tiny_llama, embedder) as gateway:
        yield gateway


@pytest.mark.slow
def test_429_with_retry_after_then_allowed_again(gw: Gateway) -> None:
    clock = FakeClock()
    gw.app.state.rate_limiter.clock = clock
    body = completion(gw.model, "t5 t6 t7") | {"max_tokens": 1}
    with admin(gw) as client:
        key = new_tenant(client, "limited", {"rate_limit_rpm": 2, "semantic_enabled": False})
        free_key = new_tenant(client, "unlimited", {"semantic_enabled": False})
        with gw.http(key) as http, gw.http(free_key) as free:
            first = http.post("/v1/completions", json=body)
            bad = http.post("/v1/completions", json=body | {"max_tokens": "x"})  # a 400 too
            assert first.status_code == 200 and bad.status_code == 400
            # Each answer says where the tenant's bucket stands, as OpenAI's API does.
            assert limits(first) == ("2", "1", "30s") and limits(bad) == ("2", "0", "1m0s")
            r = http.post("/v1/completions", json=body)
            err = assert_openai_error(r, 429, "rate_limit_error")
            assert (
                err["code"] == "rate_limit_exceeded" and "2 requests per minute" in err["message"]
            )
            assert r.headers["retry-after"] == "30" and limits(r) == ("2", "0", "1m0s")
            for _ in range(5):  # another tenant is not affected
                unlimited = free.post("/v1/completions", json=body)
                assert unlimited.status_code == 200
                assert limits(unlimited) == (None, None, None)  # nor told of a limit
            assert http.get("/v1/models").status_code == 200  # only completions are limited

            clock.now += 30  # one token back
            assert http.post("/v1/completions", json=body).status_code == 200
            assert http.post("/v1/completions", json=body).status_code == 429

            # A policy change applies to the next request: the limit lifted ...
            client.patch("/tenants/limited/policy", json={"rate_limit_rpm": None})
            for _ in range(4):
                assert http.post("/v1/completions", json=body).status_code == 200
            # ... and set again, on the streaming path too.
            client.patch("/tenants/limited/policy", json={"rate_limit_rpm": 1})
            streamed = http.post("/v1/completions", json=body | {"stream": True})
            assert streamed.status_code == 200 and limits(streamed) == ("1", "0", "1m0s")
            r = http.post("/v1/completions", json=body | {"stream": True})
            assert r.status_code == 429 and int(r.headers["retry-after"]) == 60
        stats = client.get("/tenants/limited/cache/stats").json()
        assert stats["rate_limited"] == 3
        assert client.get("/tenants/unlimited/cache/stats").json()["rate_limited"] == 0


@pytest.mark.slow
def test_rate_limit_knob_validation(gw: Gateway) -> None:
    with admin(gw) as client:
        client.post("/tenants", json={"id": "rl-bad"})
        for bad in (0, -1, 1.5, "ten"):
            r = client.patch("/tenants/rl-bad/policy", json={"rate_limit_rpm": bad})
            assert_openai_error(r, 400)
        r = client.patch("/tenants/rl-bad/policy", json={"rate_limit_rpm": 600})
        assert r.status_code == 200 and r.json()["policy"]["rate_limit_rpm"] == 600


def test_retry_after_is_an_integer_of_at_least_one() -> None:
    limiter = RateLimiter(FakeClock())
    fast = ctx("fast", 6000)  # a token every 10 ms: still "retry after 1 s"
    for _ in range(6000):
        limiter.check(fast)
    assert refused(limiter, fast) == 1
