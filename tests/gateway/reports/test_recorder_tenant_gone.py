"""Request statistics of a tenant deleted while its rows wait in the recorder's buffer
(gateway/reports/recorder.py): a delete that begins between the writer's tenant check
and its insert waits for the insert, then deletes its rows with the tenant's others;
before the lock (a review, session 40) the rows committed after the delete's sweep,
and a tenant re-created under the id reported traffic it never served. PostgreSQL,
the order SQLite (one writer at a time) cannot have."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import Session

import gateway.reports.recorder as recorder
from gateway.admin.service import TenantAdmin
from gateway.models import RequestStat
from gateway.reports.recorder import RequestRecord, StatsRecorder
from gateway.tenants import TenantStore
from migrations.runner import upgrade_database
from tests.gateway.conftest import PG_SERVER_URL


def test_a_delete_racing_the_stats_write_takes_the_rows_too(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    db = create_engine(url)
    store = TenantStore(db)
    admin = TenantAdmin(store, None, None)
    admin.add_tenant("tests", "acme", None)
    stats = StatsRecorder(db, CollectorRegistry())
    minted = store.namespace_id("acme")
    for _ in range(5):
        row = RequestRecord("acme", "semantic-hit", "hit", 0.97, 40, 0, 20, namespace_id=minted)
        stats.record(row)
    deleting: list[threading.Thread] = []
    real_insert = recorder.insert

    def delete_between(table: Any) -> Any:
        if deleting:  # only the first insert races a delete; later ones are the delete's own
            return real_insert(table)
        thread = threading.Thread(target=admin.delete, args=("tests", "acme"))
        thread.start()
        deleting.append(thread)
        thread.join(1.0)
        assert thread.is_alive(), "the delete did not wait for the rows' transaction"
        return real_insert(table)

    monkeypatch.setattr(recorder, "insert", delete_between)
    try:
        assert asyncio.run(stats.flush()) == 5  # written, under the lock
        deleting[0].join(10)
        assert not deleting[0].is_alive()
        admin.add_tenant("tests", "acme", None)  # re-created under the id
        with Session(db) as s:
            left = s.scalar(select(func.count()).where(RequestStat.tenant_id == "acme"))
        assert left == 0  # the delete took them
    finally:
        db.dispose()
