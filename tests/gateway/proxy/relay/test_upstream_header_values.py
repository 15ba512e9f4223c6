"""Upstream response headers pass only as what they mean (gateway/proxy/relay.py).

An upstream that echoes the request into a header the gateway passes on (a rate-limit
value, its request id) would put user text in the client's response headers; each
allowlisted header's value passes only in its own form. The allowlist itself, and the
headers kept back, are tested in test_upstream_relay.py.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from tests.gateway.conftest import Gateway
from tests.gateway.proxy.relay.support import CHAT, Scripted, answer, ask

# The upstream's x-ratelimit-* pass to clients only under this setting (they count the
# gateway's one account: gateway/proxy/cache_counts.py); what is tested here is how
# they pass and mix with the tenant's own, so it is on.
GATEWAY_SETTINGS = {"upstream_cached_tokens": "pass"}


def test_passed_headers_carry_only_what_they_mean(
    gw: Gateway, up: Scripted, tenant: tuple[str, str]
) -> None:
    """An upstream that echoes the request into a passed header (a rate-limit value, its
    request id) put user text in the client's response headers: a privacy review found
    the values checked for shape only. Now each passes only as what it means: numbers,
    durations, a date, an id. The control: the same names with such values pass."""
    marker = "my secret question"

    async def echoing(body: dict[str, Any], request: Request) -> Response:
        headers = {
            "x-ratelimit-remaining-requests": marker,
            "retry-after": f"3 {marker}",
            "x-request-id": marker,
            "x-ratelimit-limit-requests": "60",  # the controls
            "retry-after-ms": "1500",
        }
        return JSONResponse(answer("Echo."), headers=headers)

    up.handler = echoing
    with gw.http(tenant[1]) as http:
        r = http.post(CHAT, json=ask("echoed headers"))
    assert r.status_code == 200, r.text
    assert marker not in str(r.headers).lower()
    assert "x-upstream-request-id" not in r.headers
    assert r.headers["x-ratelimit-limit-requests"] == "60"
    assert r.headers["retry-after-ms"] == "1500"
