"""The HTTP client the gateway sends upstream requests with.

One client serves every tenant, so it keeps no state a tenant could leave behind: no
cookie (a session or a balancer's affinity cookie one tenant's answer set would go out
with every other tenant's requests). Its pool is sized by the caller: httpx's default
of 100 connections turned the 101st concurrent stream into a 504 the upstream never
saw.
"""

from __future__ import annotations

import http.cookiejar
from collections.abc import Mapping
from typing import Any

import httpx


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """Stores no cookie and sends none. One client serves every tenant, so a cookie
    one tenant's answer set (a session, a balancer's affinity) would go out with every
    other tenant's requests: the gateway is stateless towards its upstream."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False

    def return_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


def _cookieless_jar() -> http.cookiejar.CookieJar:
    return http.cookiejar.CookieJar(policy=_NoCookies())


def upstream_client(
    base_url: str,
    headers: Mapping[str, str],
    timeout: httpx.Timeout,
    transport: httpx.AsyncBaseTransport | None,
    max_connections: int,
    keepalive_seconds: float = 2.0,
) -> httpx.AsyncClient:
    """A client for ``base_url`` with at most ``max_connections`` at once, no cookies,
    reusing a connection idle at most ``keepalive_seconds`` (below the upstream's own
    keep-alive: gateway/settings.py ``upstream_keepalive_seconds``)."""
    return httpx.AsyncClient(
        base_url=base_url,
        headers=dict(headers),
        timeout=timeout,
        transport=transport,
        cookies=_cookieless_jar(),
        limits=httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=min(max_connections, 100),
            keepalive_expiry=keepalive_seconds,
        ),
    )
