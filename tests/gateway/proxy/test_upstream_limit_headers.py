"""A shared upstream's ``x-ratelimit-*`` headers count the gateway's one account:
every tenant's requests and tokens. Passed to each tenant, they let one read the others'
traffic (a review, session 41). They are hidden whatever the upstream's cache (since
session 50: an isolated server, vLLM, had passed them; its cache does not make its
account's limits any less shared) and passed only with
``CACHEGATE_UPSTREAM_CACHED_TOKENS=pass``. The prompt time ``openai-processing-ms``, a
cache timer, goes where the cache counts go (gateway/proxy/cache_counts.py): passed from
an isolated server."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.policy import TenantPolicy
from semantic import Embedder
from tests.gateway.proxy.test_cache_counts_gateway import PrefixServer, ask, prefix_gateway

LIMITS = {
    "x-ratelimit-limit-requests": "10000",
    "x-ratelimit-remaining-requests": "9994",
    "x-ratelimit-remaining-tokens": "1994600",
    "openai-processing-ms": "187",
}


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_a_shared_accounts_limits_are_not_told_to_each_tenant(
    embedder: Embedder, tmp_path: Path, stream: bool
) -> None:
    server = PrefixServer(owned_by="acme-cloud", headers=dict(LIMITS))
    with prefix_gateway(server, tmp_path, embedder) as gw:
        _, headers, _ = ask(gw, gw.tenant("a")[1], stream=stream)
    assert not {name for name in headers if name.startswith("x-ratelimit-")}
    assert "openai-processing-ms" not in headers


def test_pass_passes_them(embedder: Embedder, tmp_path: Path) -> None:
    server = PrefixServer(owned_by="acme-cloud", headers=dict(LIMITS))
    with prefix_gateway(server, tmp_path, embedder, upstream_cached_tokens="pass") as gw:
        _, headers, _ = ask(gw, gw.tenant("a")[1])
    assert headers["x-ratelimit-remaining-requests"] == "9994"
    assert headers["openai-processing-ms"] == "187"


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_an_isolated_upstream_passes_its_timer_but_not_its_accounts_limits(
    embedder: Embedder, tmp_path: Path, stream: bool
) -> None:
    """vLLM honours the salt, so its prompt time tells only of the tenant's own cache;
    its account's limits (a managed endpoint in front of it sends them) still count
    every tenant's traffic, and another tenant's requests move them (the review's
    repro, session 50)."""
    server = PrefixServer(owned_by="vllm", honours_salt=True, headers=dict(LIMITS))
    with prefix_gateway(server, tmp_path, embedder) as gw:
        _, headers, _ = ask(gw, gw.tenant("a")[1], stream=stream)
        limited = gw.tenant("limited", TenantPolicy(rate_limit_rpm=5))[1]
        _, own, _ = ask(gw, limited, stream=stream)
    assert headers["openai-processing-ms"] == "187"  # the control: the allowlist passes
    assert not {name for name in headers if name.startswith("x-ratelimit-")}
    # a tenant with its own limit is told its own, and still none of the account's
    assert own["x-ratelimit-limit-requests"] == "5"
    assert own["x-ratelimit-remaining-requests"] == "4"
    assert "x-ratelimit-remaining-tokens" not in own
