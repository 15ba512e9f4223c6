"""Per-request cache controls: the body's ``cache`` object and ``Cache-Control``.

Against the scripted vLLM upstream (each question gets its own recorded answer),
the real embedder and a real SQLite file. Every refusal has a positive control
beside it: the same request without the control is a hit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.app import Components
from gateway.policy import TenantPolicy
from semantic import Embedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.conftest import Gateway, assert_openai_error, gateway_settings, running_gateway
from tests.gateway.scripted_upstream import Upstream, scripted_upstream

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with scripted_upstream("vllm") as upstream:
        yield upstream


@pytest.fixture(scope="module")
def gw(
    up: Upstream, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    settings = gateway_settings(tmp_path_factory.mktemp("controls"), upstream_url=up.url)
    with running_gateway(settings, Components(embedder=embedder)) as gateway:
        yield gateway


@pytest.fixture
def http(gw: Gateway) -> Iterator[httpx.Client]:
    with gw.http(gw.tenant("cc")[1]) as client:
        yield client


def ask(http: httpx.Client, question: str, cache: Any = None, **headers: str) -> httpx.Response:
    body: dict[str, Any] = {"model": rec.MODEL, "messages": [{"role": "user", "content": question}]}
    if cache is not None:
        body["cache"] = cache
    r = http.post(CHAT, json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r


def test_no_store_and_no_cache(http: httpx.Client, up: Upstream) -> None:
    q = "What is the capital of Italy?"
    assert ask(http, q, {"no-store": True}).headers["x-cachegate-backfill"] == "skipped:no-store"
    assert "cache" not in up.chats()[-1]
    assert ask(http, q).headers["x-cachegate-backfill"] == "stored"
    bypass = ask(http, q, {"no-cache": True})
    assert bypass.headers["x-cachegate-semantic"] == "skipped:no-cache"
    # no-cache skips the lookup, not the backfill: the fresh answer replaces the entry
    # (as HTTP caches and LiteLLM store it; never stored before session 43)
    assert bypass.headers["x-cachegate-backfill"] == "stored"
    again = ask(http, q)
    assert again.headers["x-cachegate-cache"] == "semantic-hit"  # positive control
    said = [r.json()["choices"][0]["message"]["content"] for r in (bypass, again)]
    assert said[0] == said[1]  # the answer the no-cache request fetched
    header = ask(http, q, **{"Cache-Control": "no-cache, no-store"})  # both: neither
    assert header.headers["x-cachegate-semantic"] == "skipped:no-cache"
    assert header.headers["x-cachegate-backfill"] == "skipped:no-store"


def test_max_age_accepts_only_younger_entries(http: httpx.Client) -> None:
    q = "What is the capital of Spain?"
    assert ask(http, q).headers["x-cachegate-backfill"] == "stored"
    time.sleep(2.2)
    # no-store: the answer to these misses would otherwise refresh the entry.
    old = ask(http, q, {"no-store": True}, **{"Cache-Control": "max-age=1"})
    assert old.headers["x-cachegate-semantic"] == "miss:max_age"
    old = ask(http, q, {"s-maxage": 1, "no-store": True})
    assert old.headers["x-cachegate-semantic"] == "miss:max_age"
    # The refused entry was not deleted (it is fresh for others), and a looser bound hits.
    young = ask(http, q, **{"Cache-Control": "s-maxage=3600"})
    assert young.headers["x-cachegate-cache"] == "semantic-hit"


def test_ttl_only_shortens(http: httpx.Client) -> None:
    q = "What is the capital of Portugal?"
    assert ask(http, q, {"ttl": 1}).headers["x-cachegate-backfill"] == "stored"
    time.sleep(2.2)
    assert ask(http, q).headers["x-cachegate-semantic"] == "miss:expired"
    assert ask(http, q).headers["x-cachegate-cache"] == "semantic-hit"  # stored again, kept


def test_the_longest_ttl_is_stored_for_a_tenant_whose_entries_never_expire(gw: Gateway) -> None:
    """The bound of 'cache.ttl' (refused past it: below) still stores: a tenant with no
    TTL of its own takes the client's as it is, and its expiry date must not overflow."""
    q = "What is the capital of Finland?"
    with gw.http(gw.tenant("cc-forever", TenantPolicy(ttl_seconds=None))[1]) as http:
        assert ask(http, q, {"ttl": 2**31 - 1}).headers["x-cachegate-backfill"] == "stored"
        assert ask(http, q).headers["x-cachegate-cache"] == "semantic-hit"


def test_namespace_narrows_inside_the_tenant(gw: Gateway, http: httpx.Client) -> None:
    q = "What is the capital of Greece?"
    assert ask(http, q, {"namespace": "team-a"}).headers["x-cachegate-backfill"] == "stored"
    assert ask(http, q, {"namespace": "team-a"}).headers["x-cachegate-cache"] == "semantic-hit"
    assert ask(http, q, {"namespace": "team-b"}).headers["x-cachegate-semantic"] == "miss:empty"
    assert ask(http, q).headers["x-cachegate-semantic"] == "miss:empty"  # not the tenant's own
    with gw.http(gw.tenant("cc-other")[1]) as other:
        # The same namespace name in another tenant is another partition.
        other_tenant = ask(other, q, {"namespace": "team-a"})
        assert other_tenant.headers["x-cachegate-semantic"] == "miss:empty"


@pytest.mark.parametrize(
    ("cache", "param"),
    [
        ("yes", "cache"),
        ({"ttl": "60"}, "cache.ttl"),
        ({"ttl": 0}, "cache.ttl"),
        # Past a 32-bit second count the expiry date overflowed: never stored, silently.
        ({"ttl": 2**31}, "cache.ttl"),
        ({"ttl": 10**30}, "cache.ttl"),
        ({"max-age": 2**31}, "cache.max-age"),
        ({"no-cache": 1}, "cache.no-cache"),
        ({"s-maxage": -1}, "cache.s-maxage"),
        ({"namespace": ""}, "cache.namespace"),
        ({"unknown": True}, "cache"),
    ],
)
def test_malformed_cache_object_is_a_400(http: httpx.Client, cache: Any, param: str) -> None:
    body = {"model": rec.MODEL, "messages": [{"role": "user", "content": "Hi"}], "cache": cache}
    err = assert_openai_error(http.post(CHAT, json=body), 400, "invalid_request_error")
    assert err["param"] == param
