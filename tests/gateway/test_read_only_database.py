"""A PostgreSQL that answers read-only: a standby or a demoted primary after a
failover, or ``default_transaction_read_only`` during maintenance. Its writes fail
with SQLSTATE 25006 (``sqlalchemy.exc.InternalError``), which before session 44 was
a 500 on every admin write, an ``error:internal`` backfill with a traceback, and a
batch of hit counts lost. Now it is the database away: 503 on the admin API, the
semantic store unavailable, the hit counts kept for the next try. Real PostgreSQL:
the schema is migrated writable, then opened read-only; reads still answer (the
positive controls)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine

from gateway.admin.service import TenantAdmin
from gateway.app import Components
from gateway.settings import Settings
from gateway.tenants import TenantStore
from migrations.runner import upgrade_database
from semantic.errors import StoreUnavailableError
from semantic.hit_counter import HitCounter
from semantic.store import EntryStore, NewEntry
from tests.gateway.conftest import (
    PG_SERVER_URL,
    assert_openai_error,
    gateway_settings,
    running_gateway,
)
from tests.gateway.scripted_upstream import scripted_upstream

pytestmark = pytest.mark.postgres

ADMIN_TOKEN = "admin-token-for-tests-0123456789"
READ_ONLY = "%20-cdefault_transaction_read_only%3Don"


@pytest.fixture
def urls(pg_schema: str) -> tuple[str, str]:
    """(the schema writable, the same schema read-only), migrated."""
    writable = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(writable)
    return writable, writable + READ_ONLY


def entry(question: str) -> NewEntry:
    vector = np.zeros(384, dtype=np.float32)
    vector[0] = 1.0
    return NewEntry(
        partition_key="p", tenant="t", question=question, answer={"a": 1},
        embedding=vector, embedder_id="e", entities=None, expires_at=None, ttl_seconds=None,
    )  # fmt: skip


def test_semantic_writes_are_the_store_unavailable_and_hit_counts_are_kept(
    urls: tuple[str, str],
) -> None:
    writable, read_only = urls
    rw, ro = EntryStore(writable), EntryStore(read_only)
    try:
        now = datetime.now(UTC)
        stored, _ = rw.upsert(entry("What are your opening hours?"), now=now)
        assert ro.get(stored.id).question == "What are your opening hours?"  # reads answer
        with pytest.raises(StoreUnavailableError):
            ro.upsert(entry("How do I get an invoice?"), now=now)
        with pytest.raises(StoreUnavailableError):
            ro.delete_where(tenant="t")
        counter = HitCounter(ro, 3600)
        counter.record(stored.id, at=now)
        assert counter.flush() is False and counter.pending() == 1  # kept, not lost
        # The control: the same hit written through the writable store.
        counter.sink = rw
        assert counter.flush() is True and counter.pending() == 0
        assert rw.get(stored.id).hit_count == 1
        counter.close()
    finally:
        ro.close()
        rw.close()


def test_admin_writes_on_a_read_only_database_are_503(
    urls: tuple[str, str], tmp_path: Path
) -> None:
    writable, read_only = urls
    tenant = "t" + uuid.uuid4().hex[:8]
    engine = create_engine(writable)
    try:
        TenantAdmin(TenantStore(engine), None, None).add_tenant("test", tenant, None)
    finally:
        engine.dispose()
    with scripted_upstream() as up:

        def settings(url: str) -> Settings:
            return gateway_settings(
                tmp_path, url, upstream_url=up.url, semantic_enabled=False,
                admin_token=ADMIN_TOKEN,
            )  # fmt: skip

        with running_gateway(settings(writable), Components()):
            pass  # the first start stores the server's secrets; later ones read them
        with (
            running_gateway(settings(read_only), Components()) as gw,
            gw.http(timeout=30) as http,
        ):
            admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            listed = http.get("/admin/tenants", headers=admin)  # the control: a read
            assert listed.status_code == 200 and tenant in listed.text
            created = http.post("/admin/tenants", headers=admin, json={"id": "new-one"})
            assert_openai_error(created, 503, "service_unavailable")
            keyed = http.post(f"/admin/tenants/{tenant}/keys", headers=admin, json={"name": "k"})
            assert_openai_error(keyed, 503, "service_unavailable")
