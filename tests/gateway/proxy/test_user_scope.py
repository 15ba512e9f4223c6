"""``semantic_scope: user`` (seed 003, 安全考量): each end user has an own partition.

Negative and positive controls side by side: the same user hits, another user of
the same tenant misses, a request without a user is neither looked up nor stored,
and a tenant-scoped tenant shares its answers across its users.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway.app import Components
from gateway.policy import TenantPolicy
from gateway.proxy.controls import end_user
from semantic import Embedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway
from tests.gateway.scripted_upstream import scripted_upstream

CHAT = "/v1/chat/completions"
USER_HEADER = "x-end-user"


@pytest.fixture(scope="module")
def gw(embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with scripted_upstream("vllm") as up:
        settings = gateway_settings(
            tmp_path_factory.mktemp("user-scope"), upstream_url=up.url, user_header=USER_HEADER
        )
        with running_gateway(settings, Components(embedder=embedder)) as gateway:
            yield gateway


def ask(http: httpx.Client, question: str, user: str | None = None, **headers: str) -> str:
    body = {"model": rec.MODEL, "messages": [{"role": "user", "content": question}]}
    if user is not None:
        body["user"] = user
    r = http.post(CHAT, json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r.headers["x-cachegate-semantic"]


def test_user_scope_isolates_users_of_one_tenant(gw: Gateway) -> None:
    _, key = gw.tenant("scoped", TenantPolicy(semantic_scope="user"))
    q = "What is the capital of Norway?"

    def by(user: str) -> dict[str, str]:
        return {USER_HEADER: user}

    with gw.http(key) as http:
        assert ask(http, q, **by("alice")).startswith("miss")
        assert ask(http, q, **by("alice")) == "hit"  # positive control: the same user
        assert ask(http, q, **by("bob")).startswith("miss")  # another user of the tenant
        assert ask(http, q, **by("bob")) == "hit"
        assert ask(http, q) == "skipped:no_user"  # no identity: never shared, never stored
        assert ask(http, "What is the capital of Finland?") == "skipped:no_user"
        assert ask(http, "What is the capital of Finland?", **by("carol")).startswith("miss")


def test_the_configured_header_is_the_only_source_of_the_user(gw: Gateway) -> None:
    _, key = gw.tenant("scoped-header", TenantPolicy(semantic_scope="user"))
    q = "What is the capital of Sweden?"
    with gw.http(key) as http:
        assert ask(http, q, **{USER_HEADER: "dave"}).startswith("miss")
        assert ask(http, q, **{USER_HEADER: "dave"}) == "hit"
        # The operator's header wins over the body's field.
        assert ask(http, q, user="eve", **{USER_HEADER: "dave"}) == "hit"
        assert ask(http, q, user="eve", **{USER_HEADER: "erin"}).startswith("miss")
        # Without the header (or with it empty) the body's user is never believed: it
        # read dave's answers by claiming "user": "dave".
        assert ask(http, q, user="dave") == "skipped:no_user"
        assert ask(http, q, user="dave", **{USER_HEADER: ""}) == "skipped:no_user"


def test_without_a_configured_header_the_body_names_the_user() -> None:
    assert end_user({}, {"user": "alice"}, None) == "alice"
    assert end_user({"x-end-user": "bob"}, {"user": "alice"}, None) == "alice"  # not ours
    assert end_user({}, {}, None) is None
    assert end_user({"x-end-user": "bob"}, {"user": "alice"}, "x-end-user") == "bob"
    assert end_user({}, {"user": "alice"}, "x-end-user") is None


def test_tenant_scope_shares_answers_across_users(gw: Gateway) -> None:
    _, key = gw.tenant("shared")
    q = "What is the capital of Denmark?"
    with gw.http(key) as http:
        assert ask(http, q, user="alice").startswith("miss")
        assert ask(http, q, user="bob") == "hit"
        assert ask(http, q) == "hit"
