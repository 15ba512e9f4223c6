"""Who may call /admin: the admin token only. Every admin route (found in the app's
own route table, so a new route cannot be forgotten) refuses no token, a wrong
token, another scheme (401) and a tenant's API key (403); with no admin token
configured every admin route answers 403 naming CACHEGATE_ADMIN_TOKEN. Positive
control on every route: the admin token gets through the auth check."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from gateway.admin.auth import actor_name, token_matches
from gateway.app import create_app
from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.admin_support import ADMIN_TOKEN, admin, admin_gateway, new_tenant
from tests.gateway.conftest import Gateway, assert_openai_error, gateway_settings

pytestmark = pytest.mark.slow

FILL = {"tenant_id": "no-such-tenant", "key_id": "1", "entry_id": "1", "partition_key": "ab"}


@pytest.fixture(scope="module")
def gw(
    tiny_llama: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    with admin_gateway(tmp_path_factory.mktemp("admin-auth"), tiny_llama, embedder) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def tenant_key(gw: Gateway) -> str:
    with admin(gw) as client:
        return new_tenant(client, "auth-tenant")


def admin_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, concrete path) of every route under /admin, from the app's own OpenAPI."""
    out: list[tuple[str, str]] = []
    for path, operations in app.openapi()["paths"].items():
        if path.startswith("/admin"):
            concrete = re.sub(r"\{(\w+)\}", lambda m: FILL.get(m.group(1), "1"), path)
            out.extend((method.upper(), concrete) for method in sorted(operations))
    return out


def test_every_admin_route_requires_the_admin_token(gw: Gateway, tenant_key: str) -> None:
    routes = admin_routes(gw.app)
    assert len(routes) >= 20, routes  # tenants, keys, policy, cache, audit (and review)
    cases = {
        "none": {},
        "wrong": {"Authorization": f"Bearer {ADMIN_TOKEN}x"},
        "empty": {"Authorization": "Bearer"},
        "basic": {"Authorization": f"Basic {ADMIN_TOKEN}"},
        "tenant": {"Authorization": f"Bearer {tenant_key}"},
    }
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        for method, path in routes:
            for case, headers in cases.items():
                r = client.request(method, path, headers=headers, json={})
                if case == "tenant":
                    err = assert_openai_error(r, 403, "permission_error")
                    assert err["code"] == "tenant_key_not_allowed", (method, path, err)
                else:
                    err = assert_openai_error(r, 401, "invalid_request_error")
                    assert err["code"] == "invalid_admin_token", (method, path, err)
                    assert r.headers["www-authenticate"] == "Bearer"
            # Positive control: the admin token passes the check on the same route
            # (an unknown tenant, an empty body: 4xx other than 401/403, never 5xx).
            r = client.request(
                method, path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, json={}
            )
            assert r.status_code not in (401, 403) and r.status_code < 500, (method, path, r.text)


def test_the_tenant_key_still_works_on_the_openai_routes(gw: Gateway, tenant_key: str) -> None:
    with gw.http(tenant_key) as http:
        assert http.get("/v1/models").status_code == 200
    with admin(gw, tenant_key) as client:  # ... and never on admin routes
        assert_openai_error(client.get("/tenants"), 403, "permission_error")


def test_a_revoked_tenant_key_is_still_refused_with_403(gw: Gateway) -> None:
    with admin(gw) as client:
        key = new_tenant(client, "auth-revoked")
        key_id = client.get("/tenants/auth-revoked/keys").json()["data"][0]["id"]
        assert client.delete(f"/tenants/auth-revoked/keys/{key_id}").status_code == 200
    with admin(gw, key) as client:
        assert_openai_error(client.get("/tenants"), 403)


def test_wrong_tokens_cost_the_database_one_read_at_most(
    gw: Gateway, tenant_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each wrong admin token was looked up in the database every time (a 20 kB one
    # too), where /v1 bounds the same probes by length and a negative cache.
    reads: list[str] = []
    real = gw.tenants.has_key

    def counted(raw_key: str) -> bool:
        reads.append(raw_key)
        return real(raw_key)

    monkeypatch.setattr(gw.tenants, "has_key", counted)
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        for token in ["x" * 20_000] * 5 + ["wrong-token"] * 5:
            r = client.get("/admin/tenants", headers={"Authorization": f"Bearer {token}"})
            assert_openai_error(r, 401, "invalid_request_error")
        assert reads == ["wrong-token"]
        # Positive control: a tenant key is still told apart (403), also when repeated.
        for _ in range(2):
            r = client.get("/admin/tenants", headers={"Authorization": f"Bearer {tenant_key}"})
            assert assert_openai_error(r, 403)["code"] == "tenant_key_not_allowed"


def test_actor_header_is_recorded_in_the_audit_log(gw: Gateway) -> None:
    with admin(gw, **{"X-Admin-Actor": "alice@ops <script>"}) as client:
        assert client.post("/tenants", json={"id": "auth-actor"}).status_code == 201
        events = client.get("/audit", params={"tenant": "auth-actor"}).json()["data"]
    assert [e["actor"] for e in events] == ["admin:alice@opsscript"]
    with admin(gw) as client:  # without the header: plain "admin"
        client.patch("/tenants/auth-actor", json={"name": "Actor"})
        events = client.get("/audit", params={"tenant": "auth-actor"}).json()["data"]
    assert [e["actor"] for e in events] == ["admin", "admin:alice@opsscript"]


def test_no_admin_token_configured_disables_the_admin_api(tmp_path: Path) -> None:
    # The check runs before anything the lifespan builds, so no model is needed.
    app = create_app(gateway_settings(tmp_path, admin_token=None))
    client = TestClient(app)  # not entered: no lifespan runs
    for method, path in admin_routes(app):
        for headers in ({}, {"Authorization": "Bearer anything"}):
            r = client.request(method, path, headers=headers, json={})
            err = assert_openai_error(r, 403, "permission_error")  # type: ignore[arg-type]
            assert "CACHEGATE_ADMIN_TOKEN" in err["message"], err
            assert err["code"] == "admin_api_disabled"
    # An empty token is "not configured" too, never "everyone is admin".
    empty = create_app(gateway_settings(tmp_path, admin_token=""))
    r = TestClient(empty).get("/admin/tenants", headers={"Authorization": "Bearer"})
    assert_openai_error(r, 403)  # type: ignore[arg-type]


def test_token_comparison_and_actor_names() -> None:
    assert token_matches("secret", "secret")
    assert not token_matches("secret", "secret ")
    assert not token_matches("", "secret")
    assert not token_matches("SECRET", "secret")

    class Req:
        def __init__(self, value: str | None) -> None:
            self.headers = {} if value is None else {"x-admin-actor": value}

    assert actor_name(Req(None)) == "admin"  # type: ignore[arg-type]
    assert actor_name(Req("")) == "admin"  # type: ignore[arg-type]
    assert actor_name(Req("\n\r")) == "admin"  # type: ignore[arg-type]
    assert actor_name(Req("bob")) == "admin:bob"  # type: ignore[arg-type]
    assert actor_name(Req("x" * 100)) == "admin:" + "x" * 64  # type: ignore[arg-type]


def test_who_asks_comes_before_the_body_and_admin_bodies_have_a_limit(gw: Gateway) -> None:
    # An anonymous body of any size was read and parsed before the token check (a
    # review: 300 MiB, +686 MB of memory, then a 400), and admin bodies had no limit.
    junk = b'{"id": "' + b"a" * 3_000_000  # not even JSON
    big = {"id": "auth-big", "name": "x" * 2_000_000}  # valid, over the 1 MB limit
    with httpx.Client(base_url=gw.url, timeout=60) as client:
        r = client.post(
            "/admin/tenants", content=junk, headers={"content-type": "application/json"}
        )
        assert assert_openai_error(r, 401)["code"] == "invalid_admin_token"
        r = client.post("/admin/review/samples/1/label", content=junk)
        assert assert_openai_error(r, 401)["code"] == "invalid_admin_token"
    with admin(gw) as client:
        r = client.post("/tenants", json=big)
        assert assert_openai_error(r, 413)["code"] == "request_too_large"
        policy = {"allowlist_topics": ["y" * 199] * 6000}
        assert assert_openai_error(client.put("/tenants/auth-big/policy", json=policy), 413)
        # control: the same request within the limit
        assert client.post("/tenants", json={"id": "auth-big", "name": "Big"}).status_code == 201


def test_a_disabled_admin_api_refuses_before_reading_the_body(tmp_path: Path) -> None:
    app = create_app(gateway_settings(tmp_path, admin_token=None))
    r = TestClient(app).post("/admin/tenants", content=b"[" * 3_000_000)
    assert assert_openai_error(r, 403)["code"] == "admin_api_disabled"  # type: ignore[arg-type]
