"""Two live gateway replicas over one PostgreSQL schema (each with its own in-process
SmolLM2 engine, in-memory FAISS indexes and auth cache; the model and embedder
are loaded once per session): what is done through replica 1 shows on replica 2
within the replica-sync bound, and never crosses tenants.

Replica 2's auth cache is stretched to 60 s, so a key or policy change can only
reach it through the change feed, not through the cache expiring on its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from gateway.admin.cache import tenant_counters
from gateway.app import Components
from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.admin_support import ADMIN_TOKEN, admin, new_tenant, seed
from tests.gateway.conftest import (
    PG_DSN,
    PG_SERVER_URL,
    Gateway,
    assert_openai_error,
    chat_body,
    content,
    gateway_settings,
    running_gateway,
    smol_engine,
)
from tests.gateway.e2e_support import CAPITAL, CAPITAL_PARAPHRASES, post
from tests.gateway.sync.feed_support import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

POLL = 1.0
BOUND = 2 * POLL + 1.0  # two poll intervals and slack; NOTIFY normally takes milliseconds
PARAPHRASE = CAPITAL_PARAPHRASES[0]


@pytest.fixture(scope="module")
def pair(
    pg_available: None,
    smol_loaded: LoadedModel,
    embedder: Embedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Gateway, Gateway]]:
    import psycopg

    schema = f"cg_replicas_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{schema}"
    try:
        with ExitStack() as stack:
            gateways = []
            for name in ("replica-1", "replica-2"):
                data_dir: Path = tmp_path_factory.mktemp(name)
                settings = gateway_settings(
                    data_dir, url, admin_token=ADMIN_TOKEN, sync_poll_seconds=POLL
                )
                parts = Components(engine=smol_engine(smol_loaded), embedder=embedder)
                gateways.append(stack.enter_context(running_gateway(settings, parts)))
            gw1, gw2 = gateways
            gw2.tenants.cache_seconds = 60.0
            yield gw1, gw2
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def partition(gw: Gateway, tenant: str, body: dict[str, Any]) -> str:
    query = gw.query(tenant, body)
    return gw.cache.partition_key(query)


def test_replicas_listen_for_changes(pair: tuple[Gateway, Gateway]) -> None:
    for gw in pair:
        assert gw.app.state.sync.wait_until_caught_up(5)
        stats = gw.app.state.sync.stats()
        assert stats["listening"] and stats["errors"] == 0, stats


def test_a_backfill_through_one_replica_is_a_hit_on_the_other(
    pair: tuple[Gateway, Gateway],
) -> None:
    gw1, gw2 = pair
    with admin(gw1) as client:
        x_key, y_key = new_tenant(client, "rep-x"), new_tenant(client, "rep-y")
    body, paraphrase = chat_body(gw1.model, CAPITAL), chat_body(gw1.model, PARAPHRASE)
    assert gw2.semantic_verdict("rep-x", paraphrase) == "empty"
    with gw1.http(x_key) as x1:
        first = post(x1, body)
    assert first.headers["x-cachegate-cache"] == "miss"
    assert first.headers["x-cachegate-backfill"] == "stored"

    delay = wait_for(lambda: gw2.semantic_verdict("rep-x", paraphrase) is None, timeout=5.0)
    assert delay is not None and delay < BOUND, delay
    print(f"\nbackfill on replica 1 -> hit on replica 2 after {delay * 1000:.0f} ms")
    with gw2.http(x_key) as x2, gw2.http(y_key) as y2:
        hit = post(x2, paraphrase)
        assert hit.headers["x-cachegate-cache"] == "semantic-hit"
        assert content(hit) == content(first)
        other = post(y2, body)  # the identical question from another tenant: its own miss
        assert other.headers["x-cachegate-semantic"] == "miss:empty"
        assert other.headers["x-cachegate-cache"] != "semantic-hit"


def test_invalidation_through_one_replica_empties_the_other(
    pair: tuple[Gateway, Gateway],
) -> None:
    gw1, gw2 = pair
    with admin(gw1) as client:
        new_tenant(client, "inv-x")
        y_key = new_tenant(client, "inv-y")
        body = chat_body(gw1.model, CAPITAL, max_tokens=1)
        seed(gw1, "inv-x", body)
        seed(gw1, "inv-y", body)
        x_part, y_part = partition(gw2, "inv-x", body), partition(gw2, "inv-y", body)
        both = wait_for(lambda: gw2.cache.index.size(x_part) == gw2.cache.index.size(y_part) == 1)
        assert both is not None

        r = client.delete("/tenants/inv-x/cache")
        assert r.status_code == 200 and r.json()["removed"] == 1, r.text
    # No lookup on replica 2 meanwhile: lookups drop vanished rows on their own.
    delay = wait_for(lambda: gw2.cache.index.size(x_part) == 0, timeout=5.0)
    assert delay is not None and delay < BOUND, delay
    assert gw2.semantic_verdict("inv-x", body) == "empty"
    assert gw2.cache.index.size(y_part) == 1  # the other tenant's entry stays
    with gw2.http(y_key) as y2:
        assert post(y2, body).headers["x-cachegate-cache"] == "semantic-hit"


def test_a_policy_change_through_one_replica_applies_on_the_other(
    pair: tuple[Gateway, Gateway],
) -> None:
    gw1, gw2 = pair
    body = chat_body(gw1.model, CAPITAL, max_tokens=1)  # a miss costs one token
    paraphrase = chat_body(gw1.model, PARAPHRASE, max_tokens=1)
    with admin(gw1) as client:
        key = new_tenant(client, "pol-x")
        seed(gw1, "pol-x", body)
        with gw2.http(key) as http:
            assert wait_for(lambda: gw2.semantic_verdict("pol-x", paraphrase) is None)
            assert post(http, paraphrase).headers["x-cachegate-cache"] == "semantic-hit"
            r = client.patch("/tenants/pol-x/policy", json={"threshold": 0.99})
            assert r.status_code == 200, r.text

            def strict() -> bool:
                semantic = post(http, paraphrase).headers["x-cachegate-semantic"]
                return semantic == "miss:below_threshold"

            delay = wait_for(strict, timeout=5.0)
            assert delay is not None and delay < BOUND, delay
            assert post(http, body).headers["x-cachegate-cache"] == "semantic-hit"  # 1.0 clears it

            client.patch("/tenants/pol-x/policy", json={"semantic_enabled": False})
            off = wait_for(
                lambda: post(http, body).headers["x-cachegate-semantic"] == "skipped:policy",
                timeout=5.0,
            )
            assert off is not None and off < BOUND, off


def test_a_revoked_key_is_refused_by_the_other_replica(pair: tuple[Gateway, Gateway]) -> None:
    gw1, gw2 = pair
    with admin(gw1) as client:
        revoked = new_tenant(client, "key-x")
        kept = client.post("/tenants/key-x/keys", json={"name": "second"}).json()["key"]
        with gw2.http(revoked) as a, gw2.http(kept) as b:
            assert a.get("/v1/models").status_code == 200  # now cached on replica 2
            assert b.get("/v1/models").status_code == 200
            key_id = client.get("/tenants/key-x/keys").json()["data"][0]["id"]
            assert client.delete(f"/tenants/key-x/keys/{key_id}").status_code == 200

            delay = wait_for(lambda: a.get("/v1/models").status_code == 401, timeout=5.0)
            assert delay is not None and delay < BOUND, delay
            print(f"\nkey revoked on replica 1 -> 401 on replica 2 after {delay * 1000:.0f} ms")
            assert_openai_error(a.get("/v1/models"), 401)
            assert b.get("/v1/models").status_code == 200  # the tenant's other key still works


def test_a_tenant_deleted_through_one_replica_leaves_no_prompts_on_the_other(
    pair: tuple[Gateway, Gateway],
) -> None:
    gw1, gw2 = pair
    with admin(gw1) as client:
        gone, kept = new_tenant(client, "del-x"), new_tenant(client, "del-y")
        for key in (gone, kept):
            with gw2.http(key) as http:
                assert post(http, chat_body(gw2.model, CAPITAL)).status_code == 200
        prompts = gw2.state.stats
        assert prompts is not None
        assert {"del-x", "del-y"} <= set(prompts.prompts.tenants())
        metrics = gw2.state.metrics
        assert tenant_counters(metrics, "del-x") and tenant_counters(metrics, "del-y")
        assert client.delete("/tenants/del-x").status_code == 200
        delay = wait_for(lambda: "del-x" not in prompts.prompts.tenants(), timeout=5.0)
        assert delay is not None and delay < BOUND, delay
        # its metric series go too (a tenant re-created under the id starts from zero)
        assert wait_for(lambda: not tenant_counters(metrics, "del-x"), timeout=5.0) is not None
    assert "del-y" in prompts.prompts.tenants()  # positive control: the other tenant's stay
    assert tenant_counters(metrics, "del-y")


def test_a_change_to_another_tenant_keeps_this_tenants_keys_on_the_other_replica(
    pair: tuple[Gateway, Gateway],
) -> None:
    # Before, any tenant write dropped replica 2's whole auth cache, so a replica that
    # then lost the database refused (503) keys it had confirmed a moment before.
    gw1, gw2 = pair
    with admin(gw1) as client:
        kept, gone = new_tenant(client, "iso-a"), new_tenant(client, "iso-b")
        with gw2.http(kept) as a, gw2.http(gone) as b:
            assert a.get("/v1/models").status_code == 200  # both cached on replica 2
            assert b.get("/v1/models").status_code == 200
            new_tenant(client, "iso-c")  # an unrelated write through replica 1
            assert gw2.app.state.sync.wait_until_caught_up(5)
            assert gw2.tenants.cached(kept) is not None
            assert gw2.tenants.cached(gone) is not None
            # Isolation holds: a tenant deleted on replica 1 stops on replica 2 at once.
            assert client.delete("/tenants/iso-b").status_code == 200
            delay = wait_for(lambda: b.get("/v1/models").status_code == 401, timeout=5.0)
            assert delay is not None and delay < BOUND, delay
            assert gw2.tenants.cached(gone) is None
            assert gw2.tenants.cached(kept) is not None  # positive control
            assert a.get("/v1/models").status_code == 200
