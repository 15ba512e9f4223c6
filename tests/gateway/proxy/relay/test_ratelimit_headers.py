"""The tenant's own x-ratelimit-*-requests headers (gateway/proxy/ratelimit.py), beside
the upstream's it relays (fixtures: this folder's conftest): what the bucket says, in OpenAI's
format, on every answer of a limited tenant, winning over an upstream's (which count
the gateway's shared account); none where nothing is known."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from gateway.errors import RateLimitError
from gateway.policy import TenantPolicy
from gateway.proxy.ratelimit import LocalBuckets, RateLimiter, Taken, duration, limit_headers
from gateway.tenants import TenantContext
from tests.gateway.conftest import Gateway, assert_openai_error
from tests.gateway.proxy.relay.support import Scripted, answer, ask

# The upstream's x-ratelimit-* pass to clients only under this setting (they count the
# gateway's one account: gateway/proxy/cache_counts.py); what is tested here is how
# they pass and mix with the tenant's own, so it is on.
GATEWAY_SETTINGS = {"upstream_cached_tokens": "pass"}

CHAT = "/v1/chat/completions"


def test_duration_is_written_as_openai_writes_it() -> None:
    cases = {0: "0s", 0.0171: "18ms", 0.999: "999ms", 1: "1s", 6.5: "6.5s", 59.9994: "1m0s",
             60: "1m0s", 61.25: "1m1.25s", 3723: "1h2m3s", 7200: "2h0m0s"}  # fmt: skip
    assert {s: duration(s) for s in cases} == cases
    assert duration(-3) == "0s"


def test_limit_headers_from_a_bucket() -> None:
    assert limit_headers(60, 41.7) == {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "41",  # whole tokens only
        "x-ratelimit-reset-requests": "18.3s",  # 18.3 tokens to refill at one a second
    }
    assert limit_headers(2, 2.0)["x-ratelimit-reset-requests"] == "0s"  # full
    assert limit_headers(2, -0.5)["x-ratelimit-remaining-requests"] == "0"
    assert limit_headers(2, None) == {}  # the store was not asked
    assert limit_headers(60, 59.3)["x-ratelimit-reset-requests"] == "700ms"  # not 701


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_check_returns_the_headers_and_the_429_carries_them() -> None:
    clock = Clock()
    limiter = RateLimiter(clock)
    limited = TenantContext("a", "a", TenantPolicy(rate_limit_rpm=3), 1)
    seen = [limiter.check(limited)["x-ratelimit-remaining-requests"] for _ in range(3)]
    assert seen == ["2", "1", "0"]
    with pytest.raises(RateLimitError) as refused:
        limiter.check(limited)
    assert refused.value.headers["x-ratelimit-remaining-requests"] == "0"
    assert refused.value.headers["Retry-After"] == "20"
    assert refused.value.headers["x-ratelimit-reset-requests"] == "1m0s"
    clock.now += 20  # one token back
    assert limiter.check(limited)["x-ratelimit-remaining-requests"] == "0"
    # Positive control for "none": an unlimited tenant is told of no limit.
    assert limiter.check(TenantContext("b", "b", TenantPolicy(), 1)) == {}


def test_a_store_that_was_not_asked_reports_nothing() -> None:
    class Down(LocalBuckets):
        def take(self, tenant_id: str, rpm: int, cost: float = 1.0, need: float = 1.0) -> Taken:
            return Taken(True, 0.0)  # what a shared store answers while it is down

    limiter = RateLimiter(store=Down())
    assert limiter.check(TenantContext("a", "a", TenantPolicy(rate_limit_rpm=3), 1)) == {}


def test_the_tenants_limit_wins_over_the_upstreams(gw: Gateway, up: Scripted) -> None:
    # The upstream's x-ratelimit-*-requests count the gateway's one account: a limited
    # tenant is told its own; an unlimited one still gets the upstream's (positive control).
    async def with_limits(body: dict[str, Any], request: Request) -> Response:
        headers = {"x-ratelimit-remaining-requests": "4999", "x-ratelimit-remaining-tokens": "9"}
        return JSONResponse(answer("Hi."), headers=headers)

    up.handler = with_limits
    limited = gw.tenant("limited", TenantPolicy(rate_limit_rpm=5, semantic_enabled=False))[1]
    free = gw.tenant("free", TenantPolicy(semantic_enabled=False))[1]
    with gw.http(limited) as http:
        mine = http.post(CHAT, json=ask("limits please"))
        broken = http.post(CHAT, content=b"{not json")  # an error answer is told too
        embedded = http.post("/v1/embeddings", json={"model": "m", "input": "x"})  # relayed
    with gw.http(free) as http:
        theirs = http.post(CHAT, json=ask("limits please"))
    assert mine.status_code == 200 and theirs.status_code == 200
    assert mine.headers["x-ratelimit-remaining-requests"] == "4"
    assert mine.headers["x-ratelimit-limit-requests"] == "5"
    assert mine.headers["x-ratelimit-remaining-tokens"] == "9"  # no token limit of ours
    assert_openai_error(broken, 400)
    assert broken.headers["x-ratelimit-remaining-requests"] == "3"
    assert embedded.status_code == 200
    assert embedded.headers["x-ratelimit-remaining-requests"] == "2"
    assert theirs.headers["x-ratelimit-remaining-requests"] == "4999"
    assert "x-ratelimit-limit-requests" not in theirs.headers


def test_an_upstream_refusal_keeps_its_own_limits(gw: Gateway, up: Scripted) -> None:
    # The shared account is exhausted: its 429 says so, with its Retry-After and its own
    # remaining count; the tenant's "4 remaining" beside it would invite a retry at once.
    async def exhausted(body: dict[str, Any], request: Request) -> Response:
        error = {"error": {"message": "Rate limit reached", "type": "requests",
                           "param": None, "code": "rate_limit_exceeded"}}  # fmt: skip
        headers = {"retry-after": "7", "x-ratelimit-remaining-requests": "0"}
        return JSONResponse(error, status_code=429, headers=headers)

    up.handler = exhausted
    limited = gw.tenant("limited", TenantPolicy(rate_limit_rpm=5, semantic_enabled=False))[1]
    with gw.http(limited) as http:
        r = http.post(CHAT, json=ask("limits please"))
    assert_openai_error(r, 429)
    assert r.headers["retry-after"] == "7" and r.headers["x-ratelimit-remaining-requests"] == "0"
    assert r.headers["x-ratelimit-limit-requests"] == "5"  # what the upstream did not say


def test_a_limited_tenant_never_gets_the_accounts_counts_as_its_own(
    gw: Gateway, up: Scripted
) -> None:
    # Its store is down (nothing known of its bucket): the upstream's -requests headers
    # still do not reach it; an unlimited tenant gets them (positive control).
    async def with_limits(body: dict[str, Any], request: Request) -> Response:
        headers = {"x-ratelimit-remaining-requests": "4999", "x-ratelimit-remaining-tokens": "9"}
        return JSONResponse(answer("Hi."), headers=headers)

    class Down(LocalBuckets):
        def take(self, tenant_id: str, rpm: int, cost: float = 1.0, need: float = 1.0) -> Taken:
            return Taken(True, 0.0)

    up.handler = with_limits
    limiter = gw.app.state.rate_limiter
    limited = gw.tenant("limited", TenantPolicy(rate_limit_rpm=5, semantic_enabled=False))[1]
    free = gw.tenant("free", TenantPolicy(semantic_enabled=False))[1]
    store, limiter.store = limiter.store, Down()
    try:
        with gw.http(limited) as http:
            mine = http.post(CHAT, json=ask("limits please"))
        with gw.http(free) as http:
            theirs = http.post(CHAT, json=ask("limits please"))
    finally:
        limiter.store = store
    assert mine.status_code == 200 and theirs.status_code == 200
    assert not any(h.endswith("-requests") and h.startswith("x-ratelimit") for h in mine.headers)
    assert mine.headers["x-ratelimit-remaining-tokens"] == "9"
    assert theirs.headers["x-ratelimit-remaining-requests"] == "4999"
