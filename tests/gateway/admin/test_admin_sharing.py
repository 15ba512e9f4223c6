"""Prefix sharing groups set through the admin API (policy.prefix_namespace): tenants
in the same group reuse each other's prefix KV blocks, nobody else does, and
moving a tenant in or out of a group applies to its next request. Measured by
``usage.prompt_tokens_details.cached_tokens`` from the real paged-KV engine
(the tiny Llama, 16-token blocks) behind the gateway."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.admin_support import BLOCK, admin, admin_gateway, completion, new_tenant
from tests.gateway.conftest import Gateway, cached_tokens

pytestmark = pytest.mark.slow

NO_SEMANTIC = {"semantic_enabled": False}  # so every request reaches the engine


@pytest.fixture(scope="module")
def gw(
    tiny_llama: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    with admin_gateway(tmp_path_factory.mktemp("admin-share"), tiny_llama, embedder) as gateway:
        yield gateway


def prompt(start: int) -> str:
    """A 48-token prompt (three full blocks) no other test uses."""
    return " ".join(f"t{3 + (start + i) % 120}" for i in range(3 * BLOCK))


def reused(gw: Gateway, key: str, text: str) -> int:
    with gw.http(key) as http:
        r = http.post("/v1/completions", json=completion(gw.model, text, max_tokens=1))
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] >= 3 * BLOCK
    return cached_tokens(r)


def test_group_members_share_prefix_hits_and_nobody_else(gw: Gateway) -> None:
    with admin(gw) as client:
        group = NO_SEMANTIC | {"prefix_namespace": "docs"}
        a = new_tenant(client, "share-a", group)
        b = new_tenant(client, "share-b", group)
        c = new_tenant(client, "share-c", NO_SEMANTIC)  # its own namespace (the default)
        d = new_tenant(client, "share-d", NO_SEMANTIC | {"prefix_namespace": "other"})
        stats = client.get("/tenants/share-a/cache/stats").json()
        assert stats["prefix_namespace"] == "group:docs"

    text = prompt(0)
    assert reused(gw, a, text) == 0  # cold
    assert reused(gw, b, text) >= 2 * BLOCK  # positive control: B reuses A's blocks
    assert reused(gw, c, text) == 0  # not in the group: computes everything itself
    assert reused(gw, d, text) == 0  # another group is another namespace
    assert reused(gw, c, text) >= 2 * BLOCK  # ... but C reuses its own blocks
    assert reused(gw, a, text) >= 2 * BLOCK


def test_joining_and_leaving_a_group_applies_on_the_next_request(gw: Gateway) -> None:
    with admin(gw) as client:
        member = new_tenant(client, "move-member", NO_SEMANTIC | {"prefix_namespace": "team"})
        mover = new_tenant(client, "move-mover", NO_SEMANTIC)
        first, second = prompt(40), prompt(80)
        assert reused(gw, member, first) == 0
        assert reused(gw, mover, first) == 0  # not a member yet

        r = client.patch("/tenants/move-mover/policy", json={"prefix_namespace": "team"})
        assert r.status_code == 200
        assert reused(gw, mover, first) >= 2 * BLOCK  # joined: the group's blocks

        client.patch("/tenants/move-mover/policy", json={"prefix_namespace": None})
        assert reused(gw, member, second) == 0
        assert reused(gw, mover, second) == 0  # left: the group's new blocks are not its


def reused_by(gw: Gateway, key: str, text: str, user: str | None) -> int:
    body = completion(gw.model, text, max_tokens=1) | ({"user": user} if user else {})
    with gw.http(key) as http:
        r = http.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    return cached_tokens(r)


def test_prefix_scope_user_gives_each_end_user_their_own_prefix_kv(gw: Gateway) -> None:
    with admin(gw) as client:
        scoped = new_tenant(
            client, "pscope-user", NO_SEMANTIC | {"semantic_scope": "user", "prefix_scope": "user"}
        )
        shared = new_tenant(client, "pscope-tenant", NO_SEMANTIC | {"semantic_scope": "user"})
        assert client.get("/tenants/pscope-user/policy").json()["policy"]["prefix_scope"] == "user"
    text = prompt(200)
    assert reused_by(gw, scoped, text, "alice") == 0
    assert reused_by(gw, scoped, text, "alice") >= 2 * BLOCK  # positive control: her own
    assert reused_by(gw, scoped, text, "bob") == 0  # cannot confirm what alice sent
    assert reused_by(gw, scoped, text, "bob") >= 2 * BLOCK
    # without a user a request shares nothing, not even with another such request
    engine = gw.state.upstream.engine
    assert engine is not None
    before = engine.pool.num_cached_blocks
    assert reused_by(gw, scoped, text, None) == 0
    assert reused_by(gw, scoped, text, None) == 0
    # and keeps none of its KV, which no later request could reuse (it would only push
    # out blocks that are reused); a named user's does (positive control)
    assert engine.pool.num_cached_blocks == before
    assert reused_by(gw, scoped, prompt(250), "carol") == 0
    assert engine.pool.num_cached_blocks > before
    # the default (prefix_scope "tenant"): the tenant's users share, as documented
    other = prompt(300)
    assert reused_by(gw, shared, other, "alice") == 0
    assert reused_by(gw, shared, other, "bob") >= 2 * BLOCK


def test_end_users_of_one_name_in_two_tenants_of_a_group_share_nothing(gw: Gateway) -> None:
    """A sharing group's namespace has no tenant in it, and the end user's part was a
    digest of the user id alone: "alice" of tenant B reused every block "alice" of
    tenant A had sent (a review, session 40). User ids mean something in one tenant."""
    policy = NO_SEMANTIC | {"prefix_namespace": "users-docs", "prefix_scope": "user"}
    with admin(gw) as client:
        a = new_tenant(client, "guser-a", policy)
        b = new_tenant(client, "guser-b", policy)
    text = prompt(350)
    assert reused_by(gw, a, text, "alice") == 0
    assert reused_by(gw, a, text, "alice") >= 2 * BLOCK  # the control: her own, in A
    assert reused_by(gw, b, text, "alice") == 0  # B's alice is someone else
    assert reused_by(gw, b, text, "alice") >= 2 * BLOCK  # and has her own from now on


def test_sharing_group_names_are_validated(gw: Gateway) -> None:
    with admin(gw) as client:
        client.post("/tenants", json={"id": "share-bad"})
        for bad in ("", "g" * 129, 5, ["docs"]):
            r = client.patch("/tenants/share-bad/policy", json={"prefix_namespace": bad})
            assert r.status_code == 400, (bad, r.text)
        ok = client.patch("/tenants/share-bad/policy", json={"prefix_namespace": "g" * 128})
        assert ok.status_code == 200


def test_kv_block_quota_from_the_policy_is_enforced_by_the_engine(gw: Gateway) -> None:
    with admin(gw) as client:
        key = new_tenant(client, "quota-a", NO_SEMANTIC | {"kv_block_quota": 4})
    with gw.http(key) as http:
        fits = http.post(
            "/v1/completions", json=completion(gw.model, prompt(500)[: 6 * 2], max_tokens=4)
        )
        too_big = http.post(
            "/v1/completions", json=completion(gw.model, prompt(600), max_tokens=40)
        )
    assert fits.status_code == 200, fits.text  # positive control: within the quota
    assert too_big.status_code == 400
    assert "KV block quota is 4" in too_big.json()["error"]["message"]


def test_a_group_name_cannot_spell_a_users_namespace() -> None:
    """The namespace "group:G" + ":user:<digest>" was also that of a group named
    "G:user:<digest>": an admin naming that group read the user's prefix KV (session
    45's review). The user's part is a JSON list's second item now."""
    from dataclasses import replace

    from gateway.policy import TenantPolicy
    from gateway.tenants import TenantContext

    ctx = TenantContext(
        tenant_id="t",
        name="t",
        policy=TenantPolicy(prefix_namespace="G", prefix_scope="user"),
        policy_version=1,
        namespace_id="n1",
    )
    alice = ctx.for_user("alice")
    spelled = replace(ctx, policy=TenantPolicy(prefix_namespace=f"G:{alice.prefix_user}"))
    assert spelled.prefix_namespace != alice.prefix_namespace
    assert alice.prefix_namespace == f'["group:G","{alice.prefix_user}"]'
    assert ctx.for_user("alice").prefix_namespace == alice.prefix_namespace  # stable
    assert ctx.for_user("bob").prefix_namespace != alice.prefix_namespace
