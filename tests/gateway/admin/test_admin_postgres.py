"""The admin API on PostgreSQL (the several-replicas database): one tenant's whole
life through the API, including ids past 32 bits and concurrent policy writes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gateway.app import Components
from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.admin.checks import (
    check_nul_inputs,
    check_policy_maxima,
    check_writes_racing_delete,
)
from tests.gateway.admin_support import (
    ADMIN_TOKEN,
    CAPITAL,
    CAPITAL_PARAPHRASE,
    admin,
    chat,
    new_tenant,
    seed,
    tiny_engine,
)
from tests.gateway.conftest import (
    PG_SERVER_URL,
    assert_openai_error,
    gateway_settings,
    running_gateway,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def test_tenant_lifecycle_on_postgres(
    pg_schema: str,
    tiny_llama: LoadedModel,
    embedder: Embedder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    settings = gateway_settings(tmp_path, url, admin_token=ADMIN_TOKEN)
    parts = Components(engine=tiny_engine(tiny_llama), embedder=embedder)
    with running_gateway(settings, parts) as gw, admin(gw) as client:
        key = new_tenant(client, "pg-a", {"threshold": 0.9})
        new_tenant(client, "pg-b")
        assert_openai_error(client.post("/tenants", json={"id": "pg-a"}), 409)
        with gw.http(key) as http:
            assert http.get("/v1/models").status_code == 200

        # Ids past the columns' range are refused before the database sees them; the
        # largest ones it holds are plain "not found".
        assert_openai_error(client.delete(f"/tenants/pg-a/keys/{2**31}"), 400)
        assert_openai_error(client.delete(f"/tenants/pg-a/keys/{2**31 - 1}"), 404)
        assert_openai_error(client.get("/audit", params={"before_id": 2**31}), 400)
        assert client.get("/audit", params={"before_id": 2**31 - 1}).status_code == 200
        assert_openai_error(client.delete(f"/tenants/pg-a/cache/entries/{2**63}"), 400)
        assert_openai_error(client.delete(f"/tenants/pg-a/cache/entries/{2**63 - 1}"), 404)
        assert client.get("/tenants", params={"offset": 2**40}).json()["data"] == []

        # Concurrent policy writes each get their own version.
        def write(i: int) -> int:
            with admin(gw) as c:
                r = c.patch("/tenants/pg-a/policy", json={"sample_rate": i / 100})
                assert r.status_code in (200, 409), r.text
                return r.status_code

        with ThreadPoolExecutor(4) as pool:
            codes = list(pool.map(write, range(1, 9)))
        history = client.get("/tenants/pg-a/policy/history").json()["data"]
        versions = [h["version"] for h in history]
        assert versions == list(range(len(versions), 0, -1))  # no gaps, no duplicates
        assert len(versions) == 1 + codes.count(200)

        entry = seed(gw, "pg-a", chat(gw.model, CAPITAL))
        other = seed(gw, "pg-b", chat(gw.model, CAPITAL))
        report = client.post(
            "/tenants/pg-a/cache/explain", json={"body": chat(gw.model, CAPITAL_PARAPHRASE)}
        ).json()
        assert report["would_hit"] is True and report["served_entry_id"] == entry
        assert_openai_error(client.delete(f"/tenants/pg-a/cache/entries/{other}"), 404)
        stats = client.get("/tenants/pg-a/cache/stats").json()
        assert stats["semantic"]["entries"] == 1 and stats["semantic"]["partitions"] == 1

        key_id = client.get("/tenants/pg-a/keys").json()["data"][0]["id"]
        assert client.delete(f"/tenants/pg-a/keys/{key_id}").status_code == 200
        with gw.http(key) as http:
            assert_openai_error(http.get("/v1/models"), 401)

        deleted = client.delete("/tenants/pg-a").json()
        assert deleted["semantic_entries_removed"] == 1 and deleted["keys_removed"] == 1
        assert gw.cache.entries.get_many([entry, other]).keys() == {other}
        actions = [
            e["action"] for e in client.get("/audit", params={"tenant": "pg-a"}).json()["data"]
        ]
        assert actions[0] == "tenant.delete" and actions[-1] == "tenant.create"

        # What PostgreSQL cannot hold is a 400 (NUL in text: a DataError 500 before; a
        # TTL past the INTEGER column), and writes racing a delete are 404, not a
        # foreign-key or stale-data 500.
        new_tenant(client, "pg-nul")
        check_nul_inputs(client, "pg-nul")
        check_policy_maxima(gw, client, "pg-max")
        check_writes_racing_delete(gw, client, monkeypatch, "pg-race")


def test_replicas_creating_the_dev_tenant_at_once(pg_schema: str) -> None:
    """Gateways started together all ensure the dev tenant and key: the losers of the
    insert race must see the winner's rows, not fail their start-up."""
    from sqlalchemy import create_engine, func, select

    from gateway.admin.service import TenantAdmin
    from gateway.models import ApiKey
    from gateway.tenants import TenantStore
    from migrations.runner import upgrade_database

    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    stores = [TenantStore(create_engine(url)) for _ in range(6)]
    with ThreadPoolExecutor(len(stores)) as pool:
        admins = [TenantAdmin(store, None, None) for store in stores]
        created = list(pool.map(lambda a: a.ensure_dev_tenant("dev", "sk-dev-race"), admins))
    assert created.count("sk-dev-race") == 1 and created.count(None) == len(stores) - 1
    with stores[0].sessions() as s:
        assert s.scalar(select(func.count()).select_from(ApiKey)) == 1
    assert stores[0].authenticate("sk-dev-race").tenant_id == "dev"
