"""Checks of the admin API run on SQLite (test_admin_tenants.py) and on PostgreSQL
(test_admin_postgres.py) against a gateway the caller has started: input the database
cannot hold is a 400, the policy's largest values work end to end, and writes racing
a tenant delete answer (success or 404), never 500, and never leave an orphan behind.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import httpx
import pytest

import gateway.admin.policies as policies_module
import gateway.admin.service as service_module
from gateway.policy import MAX_RATE_LIMIT_RPM, MAX_TTL_SECONDS, TenantPolicy
from protocol.responses import response_body, usage
from tests.gateway.admin_support import CAPITAL, admin, chat, completion, new_tenant
from tests.gateway.conftest import Gateway, assert_openai_error

# (method, path, request keywords); "{t}" is an existing tenant. PostgreSQL text cannot
# hold NUL: each was a 500 (DataError) there.
NUL_REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/tenants/a%00b", {}),
    ("GET", "/tenants/a%00b/policy", {}),
    ("POST", "/tenants/a%00b/disable", {}),
    ("GET", "/audit", {"params": {"tenant": "a\x00"}}),
    ("GET", "/audit", {"params": {"action": "a\x00"}}),
    ("GET", "/tenants/{t}/cache/entries", {"params": {"partition_key": "a\x00"}}),
    ("DELETE", "/tenants/{t}/cache/partitions/a%00b", {}),
    ("PATCH", "/tenants/{t}", {"json": {"name": "x\x00y"}}),
    ("POST", "/tenants", {"json": {"id": "nul-new", "name": "x\x00y"}}),
    ("POST", "/tenants/{t}/keys", {"json": {"name": "x\x00y"}}),
    ("PATCH", "/tenants/{t}/policy", {"json": {"prefix_namespace": "x\x00y"}}),
    ("PATCH", "/tenants/{t}/policy", {"json": {"allowlist_topics": ["x\x00y"]}}),
    ("PUT", "/tenants/{t}/policy", {"json": {"allowlist_topics": ["ok", "\x00"]}}),
]


def check_nul_inputs(client: httpx.Client, tenant: str) -> None:
    keys = client.get(f"/tenants/{tenant}/keys").json()["data"]
    policy = client.get(f"/tenants/{tenant}/policy").json()
    for method, path, kwargs in NUL_REQUESTS:
        r = client.request(method, path.format(t=tenant), **kwargs)
        err = assert_openai_error(r, 400, "invalid_request_error")
        assert "\x00" not in err["message"], (method, path, err)
    assert client.get("/tenants/nul-new").status_code == 404  # nothing was created
    assert client.get(f"/tenants/{tenant}/keys").json()["data"] == keys
    assert client.get(f"/tenants/{tenant}").json()["name"] == tenant
    assert client.get(f"/tenants/{tenant}/policy").json() == policy  # no new version


def check_policy_maxima(gw: Gateway, client: httpx.Client, tenant: str) -> None:
    """The largest values the policy takes serve requests and store answers (the
    stored entry's ttl_seconds is an INTEGER column on PostgreSQL)."""
    key = new_tenant(client, tenant)
    changes = {"rate_limit_rpm": MAX_RATE_LIMIT_RPM, "ttl_seconds": MAX_TTL_SECONDS}
    r = client.patch(f"/tenants/{tenant}/policy", json=changes)
    assert r.status_code == 200, r.text
    with gw.http(key) as http:
        r = http.post("/v1/completions", json=completion(gw.model, "t5 t6 t7"))
        assert r.status_code == 200, r.text
    policy = TenantPolicy.model_validate(client.get(f"/tenants/{tenant}/policy").json()["policy"])
    answer = response_body("chat", "x", gw.model, "Paris.", "stop", usage(12, 3, 0))
    result = gw.cache.store(
        gw.query(tenant, chat(gw.model, CAPITAL)), answer, policy.semantic_policy()
    )
    assert result.stored, result.reason


class _Window:
    """Widens the window between a read of the tenant row and the write after it: while
    ``open``, ``require_row`` pauses after reading (holding any lock it took); with
    ``locked_only``, only a locking read pauses (the delete's, in the reverse race)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, pause: float = 0.5) -> None:
        self.open = threading.Event()
        self.locked_only = False
        for module in (service_module, policies_module):
            self._wrap(monkeypatch, module, pause)

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, module: ModuleType, pause: float) -> None:
        original = module.require_row

        def slow(s: Any, tenant_id: str, **kwargs: Any) -> Any:
            row = original(s, tenant_id, **kwargs)
            if self.open.is_set() and (kwargs.get("lock") or not self.locked_only):
                time.sleep(pause)
            return row

        monkeypatch.setattr(module, "require_row", slow)

    def race(
        self, first: Callable[[], httpx.Response], second: Callable[[], httpx.Response]
    ) -> tuple[httpx.Response, httpx.Response]:
        """Start ``first`` (it reads the row, then pauses), run ``second`` during the
        pause; both responses."""
        out: dict[str, httpx.Response] = {}
        self.open.set()
        thread = threading.Thread(target=lambda: out.update(r=first()))
        thread.start()
        time.sleep(0.2)  # ``first`` has read the row and pauses
        self.open.clear()
        r = second()
        thread.join(timeout=30)
        return out["r"], r


def check_writes_racing_delete(
    gw: Gateway, client: httpx.Client, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    """A write racing the tenant's delete succeeds before it (and the delete removes
    what it wrote) or is a 404 after it: never a 500, and never a key or policy version
    outliving its tenant (and inherited by a tenant re-created under the id)."""
    window = _Window(monkeypatch)
    other = admin(gw)

    def delete(tenant: str) -> Callable[[], httpx.Response]:
        return lambda: client.delete(f"/tenants/{tenant}")

    tenant = f"{prefix}-key"
    client.post("/tenants", json={"id": tenant})
    r, d = window.race(lambda: other.post(f"/tenants/{tenant}/keys", json={}), delete(tenant))
    assert d.status_code == 200 and r.status_code in (201, 404), (d.text, r.text)
    assert client.post("/tenants", json={"id": tenant}).status_code == 201  # a new owner
    assert client.get(f"/tenants/{tenant}/keys").json()["data"] == []
    if r.status_code == 201:  # the key issued for the deleted tenant went with it
        with gw.http(r.json()["key"]) as http:
            assert_openai_error(http.get("/v1/models"), 401)

    tenant = f"{prefix}-pol"
    client.post("/tenants", json={"id": tenant})
    patch = {"threshold": 0.31}
    r, d = window.race(lambda: other.patch(f"/tenants/{tenant}/policy", json=patch), delete(tenant))
    assert d.status_code == 200 and r.status_code in (200, 404), (d.text, r.text)
    r = client.post("/tenants", json={"id": tenant, "policy": {"threshold": 0.95}})
    assert r.status_code == 201, r.text  # not a 409 on the deleted tenant's version 1
    policy = client.get(f"/tenants/{tenant}/policy").json()
    assert (policy["version"], policy["policy"]["threshold"]) == (1, 0.95)

    writes: dict[str, Callable[[str, int], httpx.Response]] = {
        "rename": lambda path, _key: other.patch(path, json={"name": "renamed"}),
        "disable": lambda path, _key: other.post(f"{path}/disable"),
        "revoke": lambda path, key: other.delete(f"{path}/keys/{key}"),
    }
    for action, write in writes.items():
        tenant = f"{prefix}-{action}"
        new_tenant(client, tenant)
        key_id = client.get(f"/tenants/{tenant}/keys").json()["data"][0]["id"]
        path = f"/tenants/{tenant}"
        r, d = window.race(functools.partial(write, path, key_id), delete(tenant))
        assert d.status_code == 200 and r.status_code in (200, 404), (action, d.text, r.text)
        assert client.get(path).status_code == 404

    # The reverse: the delete holds the row, a write arriving meanwhile waits, then 404.
    tenant = f"{prefix}-late"
    client.post("/tenants", json={"id": tenant})
    window.locked_only = True
    d, r = window.race(delete(tenant), lambda: other.post(f"/tenants/{tenant}/keys", json={}))
    assert d.status_code == 200, d.text
    assert_openai_error(r, 404)
    other.close()
