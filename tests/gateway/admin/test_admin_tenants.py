"""Tenants, API keys and the audit log through the admin API, against a live gateway
(policies: test_admin_policies.py): every endpoint with valid and invalid input
(OpenAI-shaped 400/404/409), audit events for every change, and each change effective
on the tenant's next request (disable → 403, enable → 200, revoke → 401)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.admin.cache import tenant_counters
from gateway.tenants import hash_key
from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.admin.checks import (
    check_nul_inputs,
    check_writes_racing_delete,
)
from tests.gateway.admin_support import (
    CAPITAL,
    admin,
    admin_gateway,
    chat,
    completion,
    new_tenant,
    seed,
)
from tests.gateway.conftest import Gateway, assert_openai_error

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gw(
    tiny_llama: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    with admin_gateway(tmp_path_factory.mktemp("admin-tenants"), tiny_llama, embedder) as gateway:
        yield gateway


@pytest.fixture
def client(gw: Gateway) -> Iterator[httpx.Client]:
    with admin(gw) as c:
        yield c


def audit(client: httpx.Client, tenant: str, action: str | None = None) -> list[dict[str, Any]]:
    params = {"tenant": tenant} | ({"action": action} if action else {})
    r = client.get("/audit", params=params)
    assert r.status_code == 200, r.text
    return list(r.json()["data"])


def models_status(gw: Gateway, key: str) -> int:
    with gw.http(key) as http:
        return http.get("/v1/models").status_code


# ----------------------------------------------------------------- tenants


def test_create_get_list_rename(client: httpx.Client) -> None:
    r = client.post("/tenants", json={"id": "ten-a", "name": "Tenant A"})
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["id"] == "ten-a" and created["name"] == "Tenant A"
    assert created["disabled"] is False and created["policy_version"] == 0
    assert created["active_keys"] == 0
    assert client.get("/tenants/ten-a").json() == created
    ids = [t["id"] for t in client.get("/tenants", params={"limit": 1000}).json()["data"]]
    assert "ten-a" in ids
    assert client.get("/tenants", params={"limit": 1, "offset": 0}).json()["data"][0]["id"]

    r = client.patch("/tenants/ten-a", json={"name": "Renamed"})
    assert r.status_code == 200 and r.json()["name"] == "Renamed"
    assert client.get("/tenants/ten-a").json()["name"] == "Renamed"
    events = audit(client, "ten-a")
    assert [e["action"] for e in events] == ["tenant.update", "tenant.create"]
    assert events[0]["details"] == {"name": ["Tenant A", "Renamed"]}
    assert all(e["actor"] == "admin" and e["at"] for e in events)

    # A tenant created with a policy starts at version 1, written by the admin.
    r = client.post("/tenants", json={"id": "ten-b", "policy": {"threshold": 0.93}})
    assert r.status_code == 201 and r.json()["policy_version"] == 1
    policy = client.get("/tenants/ten-b/policy").json()
    assert policy["version"] == 1 and policy["policy"]["threshold"] == 0.93
    assert policy["created_by"] == "admin"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "id"),
        ({"id": ""}, "id"),
        ({"id": "has space"}, "id"),
        ({"id": "-leading-dash"}, "id"),
        ({"id": "x" * 65}, "id"),
        ({"id": "ok", "name": ""}, "name"),
        ({"id": "ok", "name": "n" * 256}, "name"),
        ({"id": "ok", "extra": 1}, "extra"),
        ({"id": 5}, "id"),
        ({"id": "ok", "policy": {"threshold": 2}}, "policy.threshold"),
        ({"id": "ok", "policy": {"guards": ["nope"]}}, "policy.guards"),
        ([], None),
    ],
)
def test_create_refuses_invalid_input(client: httpx.Client, body: Any, param: str | None) -> None:
    err = assert_openai_error(client.post("/tenants", json=body), 400, "invalid_request_error")
    assert err["param"] == param, err
    assert client.get("/tenants/ok").status_code == 404  # nothing was created


def test_bad_json_and_wrong_content(client: httpx.Client) -> None:
    headers = {"content-type": "application/json"}
    err = assert_openai_error(client.post("/tenants", content=b'{"id": ', headers=headers), 400)
    assert "JSON" in err["message"]
    assert_openai_error(client.put("/tenants/x/policy", content=b"nul", headers=headers), 400)
    assert_openai_error(client.post("/tenants", content=b"\xff\xfe", headers=headers), 400)
    # Positive control: the same route accepts a well-formed body.
    assert client.post("/tenants", content=b'{"id": "json-ok"}', headers=headers).status_code == 201


def test_duplicate_and_unknown_tenants(client: httpx.Client) -> None:
    assert client.post("/tenants", json={"id": "dup"}).status_code == 201
    err = assert_openai_error(client.post("/tenants", json={"id": "dup"}), 409)
    assert "already exists" in err["message"]
    for method, path, body in [
        ("GET", "/tenants/ghost", None),
        ("PATCH", "/tenants/ghost", {"name": "x"}),
        ("POST", "/tenants/ghost/disable", None),
        ("POST", "/tenants/ghost/enable", None),
        ("DELETE", "/tenants/ghost", None),
        ("POST", "/tenants/ghost/keys", {"name": "k"}),
        ("GET", "/tenants/ghost/keys", None),
        ("DELETE", "/tenants/ghost/keys/1", None),
        ("GET", "/tenants/ghost/policy", None),
        ("PUT", "/tenants/ghost/policy", {}),
        ("PATCH", "/tenants/ghost/policy", {"threshold": 0.9}),
        ("GET", "/tenants/ghost/policy/history", None),
    ]:
        err = assert_openai_error(client.request(method, path, json=body), 404)
        assert err["code"] == "tenant_not_found", (method, path, err)
    assert audit(client, "ghost") == []  # refused actions leave no audit event


def test_list_and_audit_refuse_bad_paging(client: httpx.Client) -> None:
    for params in ({"limit": 0}, {"limit": 1001}, {"limit": "x"}, {"offset": -1}):
        assert_openai_error(client.get("/tenants", params=params), 400)
    for params in ({"limit": 0}, {"before_id": 0}, {"before_id": "x"}):
        assert_openai_error(client.get("/audit", params=params), 400)
    assert_openai_error(client.patch("/tenants/dup", json={"name": ""}), 400)
    assert_openai_error(client.patch("/tenants/dup", json={}), 400)


def test_disable_then_enable(gw: Gateway, client: httpx.Client) -> None:
    key = new_tenant(client, "switch")
    assert models_status(gw, key) == 200
    r = client.post("/tenants/switch/disable")
    assert r.status_code == 200 and r.json()["disabled"] is True
    with gw.http(key) as http:  # the very next request: no wait for the auth cache
        err = assert_openai_error(http.get("/v1/models"), 403, "permission_error")
        assert "switch" in err["message"]
        body = completion(gw.model, "t5 t6")
        assert_openai_error(http.post("/v1/completions", json=body), 403)
    r = client.post("/tenants/switch/enable")
    assert r.status_code == 200 and r.json()["disabled"] is False
    assert models_status(gw, key) == 200
    actions = [e["action"] for e in audit(client, "switch")]
    assert actions[:2] == ["tenant.enable", "tenant.disable"]


def test_delete_removes_the_tenant_and_only_its_cache_entries(
    gw: Gateway, client: httpx.Client
) -> None:
    doomed_key = new_tenant(client, "doomed")
    new_tenant(client, "survivor")
    client.put("/tenants/doomed/policy", json={"threshold": 0.95})
    doomed_entry = seed(gw, "doomed", chat(gw.model, CAPITAL))
    survivor_entry = seed(gw, "survivor", chat(gw.model, CAPITAL))
    with gw.http(doomed_key) as http:
        r = http.post("/v1/chat/completions", json=chat(gw.model, CAPITAL))
        assert r.headers["x-cachegate-cache"] == "semantic-hit"

    doomed_namespace = gw.namespace("doomed")
    assert tenant_counters(gw.state.metrics, "doomed")  # it has series (positive control)
    r = client.delete("/tenants/doomed")
    assert r.status_code == 200, r.text
    assert r.json() == {
        "id": "doomed",
        "deleted": True,
        "semantic_entries_removed": 1,
        "keys_removed": 1,
        "policy_versions_removed": 1,
    }
    assert gw.cache.entries.get_many([doomed_entry, survivor_entry]).keys() == {survivor_entry}
    verdict = gw.semantic_verdict("doomed", chat(gw.model, CAPITAL), doomed_namespace)
    assert verdict == "empty"  # the index too
    assert gw.semantic_verdict("survivor", chat(gw.model, CAPITAL)) is None  # still a hit
    with gw.http(doomed_key) as http:
        assert_openai_error(http.get("/v1/models"), 401)
    assert_openai_error(client.get("/tenants/doomed"), 404)
    assert_openai_error(client.delete("/tenants/doomed"), 404)
    (event,) = audit(client, "doomed", "tenant.delete")
    assert event["details"] == {"semantic_entries": 1, "keys": 1, "policy_versions": 1}
    assert not tenant_counters(gw.state.metrics, "doomed")  # its series are gone
    # The id can be taken again, starting empty (its cache stats too).
    assert client.post("/tenants", json={"id": "doomed"}).json()["policy_version"] == 0
    stats = client.get("/tenants/doomed/cache/stats").json()
    assert stats["requests_by_cache"] == {} and stats["semantic"]["hits"] == 0


# ----------------------------------------------------------------- API keys


def test_keys_issue_list_revoke(gw: Gateway, client: httpx.Client) -> None:
    assert client.post("/tenants", json={"id": "keys"}).status_code == 201
    r = client.post("/tenants/keys/keys", json={"name": "ci"})
    assert r.status_code == 201, r.text
    first = r.json()
    raw = first["key"]
    assert raw.startswith("cg-") and len(raw) > 40 and first["prefix"] == raw[:10]
    second = client.post("/tenants/keys/keys").json()  # no body: unnamed
    assert second["name"] == "" and second["key"] != raw
    assert models_status(gw, raw) == 200 and models_status(gw, second["key"]) == 200

    listed = client.get("/tenants/keys/keys").json()["data"]
    assert [k["id"] for k in listed] == [first["id"], second["id"]]
    text = json.dumps(listed)
    assert raw not in text and hash_key(raw) not in text and "key_hash" not in text
    assert set(listed[0]) == {"id", "tenant_id", "name", "prefix", "created_at", "revoked_at"}
    assert client.get("/tenants/keys").json()["active_keys"] == 2

    r = client.delete(f"/tenants/keys/keys/{first['id']}")
    assert r.status_code == 200 and r.json()["revoked_at"] is not None
    with gw.http(raw) as http:  # refused on the next request
        err = assert_openai_error(http.get("/v1/models"), 401)
        assert err["code"] == "invalid_api_key"
    assert models_status(gw, second["key"]) == 200  # positive control: the other key works
    again = client.delete(f"/tenants/keys/keys/{first['id']}")
    assert again.status_code == 200 and again.json()["revoked_at"] == r.json()["revoked_at"]
    assert client.get("/tenants/keys").json()["active_keys"] == 1

    # Never another tenant's key through this tenant's route.
    client.post("/tenants", json={"id": "keys-other"})
    other = client.post("/tenants/keys-other/keys").json()
    err = assert_openai_error(client.delete(f"/tenants/keys/keys/{other['id']}"), 404)
    assert err["code"] == "key_not_found"
    assert models_status(gw, other["key"]) == 200
    for bad in ("0", "-1", "x", str(2**31), str(2**64)):
        assert_openai_error(client.delete(f"/tenants/keys/keys/{bad}"), 400)
    assert_openai_error(client.delete("/tenants/keys/keys/999999"), 404)
    assert_openai_error(client.post("/tenants/keys/keys", json={"name": "n" * 256}), 400)
    assert_openai_error(client.post("/tenants/keys/keys", json={"nam": "x"}), 400)

    events = audit(client, "keys")
    assert [e["action"] for e in events] == [
        "key.revoke", "key.revoke", "key.issue", "key.issue", "tenant.create",
    ]  # fmt: skip
    assert events[0]["details"]["already_revoked"] is True
    assert events[1]["details"] == {
        "key_id": first["id"], "prefix": first["prefix"], "already_revoked": False,
    }  # fmt: skip
    everything = json.dumps(client.get("/audit", params={"limit": 1000}).json())
    for key in (raw, second["key"], other["key"]):
        assert key not in everything and hash_key(key) not in everything


# ----------------------------------------------------------------- input bounds


def test_nul_in_admin_input_is_refused(client: httpx.Client) -> None:
    client.post("/tenants", json={"id": "nul-t"})
    check_nul_inputs(client, "nul-t")


def test_error_messages_do_not_echo_input(client: httpx.Client) -> None:
    """Messages name the field and never quote back arbitrary input (markup)."""
    client.post("/tenants", json={"id": "echo"})
    refused = [
        client.get("/tenants/<b>x</b>"),
        client.delete("/tenants/<b>x</b>/keys/1"),
        client.post("/tenants", json={"id": "echo-2", "<b>x</b>": 1}),
        client.patch("/tenants/echo/policy", json={"<b>x</b>": 1}),
        client.patch("/tenants/echo/policy", json={"guards": ["<b>x</b>"]}),
        client.patch("/tenants/echo/policy", json={"entity_kinds": ["<b>x</b>"]}),
        client.post("/tenants/echo/cache/explain", json={"body": {"<b>x</b>": 1}, "x<b>": 2}),
    ]
    for r in refused:
        err = assert_openai_error(r, r.status_code)
        assert r.status_code in (400, 404) and "<b>" not in err["message"], err
    # A valid id is still named, and so is a field that looks like one.
    assert "'no-such'" in assert_openai_error(client.get("/tenants/no-such"), 404)["message"]
    err = assert_openai_error(client.patch("/tenants/echo/policy", json={"thresold": 1}), 400)
    assert "thresold" in err["message"], err


def test_sqlite_enforces_the_tenant_foreign_keys(gw: Gateway) -> None:
    with gw.app.state.db.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_writes_racing_a_delete_answer_404_and_leave_no_orphan(
    gw: Gateway, client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    check_writes_racing_delete(gw, client, monkeypatch, "race")


def test_a_delete_leaves_the_entries_of_a_tenant_created_again_meanwhile(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sweep after the delete's commit works by id: a tenant created again under the
    # id in between lost its new entries to it (an admin review widened the window).
    admin = gw.admin
    swept: list[str] = []
    real_sweep, real_invalidate = admin._drop_entries, admin.store.invalidate_cache

    def sweep(tenant_id: str) -> int:
        swept.append(tenant_id)
        return real_sweep(tenant_id)

    recreate: list[bool] = []  # armed once, for the first delete

    def recreated_meanwhile(ids: list[str]) -> None:
        real_invalidate(ids)
        if "again" in ids and recreate:
            recreate.clear()
            admin.add_tenant("tests", "again", None)  # right after the delete's commit

    monkeypatch.setattr(admin, "_drop_entries", sweep)
    monkeypatch.setattr(admin.store, "invalidate_cache", recreated_meanwhile)
    admin.add_tenant("tests", "again", None)
    recreate.append(True)
    admin.delete("tests", "again")
    assert swept == ["again"]  # before the commit only: the id is taken again after it
    assert admin.store.namespace_id("again")
    admin.delete("tests", "again")  # control: nobody takes the id this time
    assert swept == ["again", "again", "again"]
