"""A misfire sample is written in the background after the hit was served; when its
tenant was deleted meanwhile (and perhaps re-created under the same id), the sample
is dropped: the new tenant's reviewers must not see the old tenant's questions, and
labels on them must not move the new tenant's verifier cut. Real migrated SQLite, and
PostgreSQL for a delete racing the write."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import Session

import gateway.review.sampling as sampling
from gateway.admin.service import TenantAdmin
from gateway.models import MisfireSample
from gateway.review.sampling import MisfireSampler, _Hit
from gateway.tenants import TenantStore
from migrations.runner import upgrade_database
from tests.gateway.conftest import PG_SERVER_URL
from tests.gateway.test_calibration import migrated


def hit(tenant_id: str, namespace_id: str) -> _Hit:
    return _Hit(
        tenant_id=tenant_id,
        namespace_id=namespace_id,
        namespace=f"tenant:{tenant_id}:{namespace_id}",
        kind="chat",
        body={},
        request_id="req-1",
        entry_id=1,
        partition_key="p",
        question="What is my balance?",
        matched_question="What's my balance?",
        served_answer="It is 12 euros.",
        score=0.95,
        threshold=0.84,
        entity_kinds=None,
        sampling={"rate": 1.0, "probability": 1.0, "boosted": False},
    )


def count(sessions: Session) -> int:
    return int(sessions.scalar(select(func.count()).select_from(MisfireSample)) or 0)


def test_a_sample_of_a_deleted_or_recreated_tenant_is_dropped(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    store = TenantStore(db)
    admin = TenantAdmin(store, None, None)
    sampler = MisfireSampler(db, upstream=None, embedder=None)  # type: ignore[arg-type]
    admin.add_tenant("tests", "acme", None)
    served = hit("acme", store.namespace_id("acme"))
    asyncio.run(sampler._process(served))  # positive control: the tenant is there
    admin.delete("tests", "acme")
    asyncio.run(sampler._process(served))  # deleted: dropped
    admin.add_tenant("tests", "acme", None)  # re-created under the id: another tenant
    asyncio.run(sampler._process(served))
    with Session(db) as s:
        assert count(s) == 0  # the first sample went with the delete; no later one
    fresh = hit("acme", store.namespace_id("acme"))
    asyncio.run(sampler._process(fresh))  # the new tenant's own hits are sampled
    with Session(db) as s:
        assert count(s) == 1
    assert sampler.samples.labels("written")._value.get() == 2
    assert sampler.samples.labels("dropped")._value.get() == 2
    db.dispose()


@pytest.mark.postgres
def test_a_delete_racing_the_sample_write_takes_the_sample_too(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL, the order SQLite cannot have: the tenant's delete begins between the
    sampler's tenant check and its insert. It must wait for the sample's transaction
    and then delete the sample with the tenant's others; before the lock, the insert
    committed after the delete's sweep and the re-created tenant saw it."""
    url = f"{PG_SERVER_URL}?options=-csearch_path%3D{pg_schema}"
    upgrade_database(url)
    db = create_engine(url)
    store = TenantStore(db)
    admin = TenantAdmin(store, None, None)
    sampler = MisfireSampler(db, upstream=None, embedder=None)  # type: ignore[arg-type]
    admin.add_tenant("tests", "acme", None)
    served = hit("acme", store.namespace_id("acme"))
    deleting: list[threading.Thread] = []
    new_sample = sampling.MisfireSample

    def delete_between(**fields: object) -> MisfireSample:
        thread = threading.Thread(target=admin.delete, args=("tests", "acme"))
        thread.start()
        deleting.append(thread)
        thread.join(1.0)
        assert thread.is_alive(), "the delete did not wait for the sample's transaction"
        return new_sample(**fields)

    monkeypatch.setattr(sampling, "MisfireSample", delete_between)
    try:
        assert sampler._write_sample(served) is not None  # written, under the lock
        deleting[0].join(10)
        assert not deleting[0].is_alive()
        admin.add_tenant("tests", "acme", None)  # re-created under the id
        with Session(db) as s:
            assert count(s) == 0  # the delete took it
    finally:
        db.dispose()
