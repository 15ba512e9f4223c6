"""A replica with the semantic layer off, beside one that serves it, over one
PostgreSQL schema: an invalidation or a tenant delete sent to the first (the load
balancer's choice) fences and deletes the rows all the same, and the second drops
them through its change feed (semantic/store_rows.py). Before, both answered 200 with
nothing removed: the entry went on being served, and a deleted tenant's questions
and answers stayed in the database (a review, session 41). Scripted upstream."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gateway.app import Components
from semantic import Embedder
from semantic.models import SemanticEntry
from tests.gateway.admin_support import ADMIN_TOKEN, admin, new_tenant
from tests.gateway.conftest import PG_DSN, PG_SERVER_URL, Gateway, gateway_settings, running_gateway
from tests.gateway.proxy.relay.support import CHAT, MODEL, Scripted, answer
from tests.gateway.sync.feed_support import wait_for
from tests.live_server import serving

pytestmark = [pytest.mark.postgres]

QUESTION = "What is the refund window for an order?"


@pytest.fixture(scope="module")
def pair(
    pg_available: None, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Gateway, Gateway]]:
    """(the replica with the layer off, the one serving it)."""
    import psycopg

    up = Scripted()

    async def handler(body: dict[str, Any], request: Request) -> Response:
        return JSONResponse(answer(f"Within 30 days. ({body['messages'][-1]['content']})"))

    up.handler = handler
    schema = f"cg_semoff_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{schema}"
    try:
        with ExitStack() as stack:
            up.url = stack.enter_context(serving(up.app()))
            gateways = []
            for name, on in (("off", False), ("on", True)):
                settings = gateway_settings(
                    tmp_path_factory.mktemp(name),
                    url,
                    admin_token=ADMIN_TOKEN,
                    upstream_url=up.url,
                    semantic_enabled=on,
                    sync_poll_seconds=1.0,
                )
                parts = Components(embedder=embedder if on else None)
                gateways.append(stack.enter_context(running_gateway(settings, parts)))
            yield gateways[0], gateways[1]
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def rows_of(gw: Gateway, tenant: str) -> int:
    with Session(gw.cache.entries.engine) as s:
        return int(s.scalar(select(func.count()).where(SemanticEntry.tenant == tenant)) or 0)


def ask(gw: Gateway, key: str) -> str:
    body = {"model": MODEL, "messages": [{"role": "user", "content": QUESTION}]}
    with gw.http(key) as http:
        got = http.post(CHAT, json=body)
    assert got.status_code == 200, got.text
    return got.headers["x-cachegate-cache"]


def test_admin_calls_on_a_replica_without_the_layer_still_remove_the_rows(
    pair: tuple[Gateway, Gateway],
) -> None:
    off, on = pair
    with admin(off) as client:
        x_key, y_key = new_tenant(client, "semoff-x"), new_tenant(client, "semoff-y")
    for key in (x_key, y_key):
        assert ask(on, key) == "miss"  # stored
        assert ask(on, key) == "semantic-hit"
    assert rows_of(on, "semoff-x") == rows_of(on, "semoff-y") == 1

    with admin(off) as client:
        r = client.delete("/tenants/semoff-x/cache")
        assert r.status_code == 200 and r.json()["removed"] == 1, r.text
    assert rows_of(on, "semoff-x") == 0
    # the serving replica drops the vector through its feed: a miss, not the old answer
    assert wait_for(lambda: ask(on, x_key) == "miss", timeout=5.0) is not None
    assert ask(on, y_key) == "semantic-hit"  # the control: the other tenant's entry stays

    with admin(off) as client:
        r = client.delete("/tenants/semoff-y")
        assert r.status_code == 200 and r.json()["semantic_entries_removed"] == 1, r.text
    assert rows_of(on, "semoff-y") == 0
