"""A misfire sample of a hit served while the database is away (hits come from memory
then) waits for it, within about a minute, instead of being lost at the first failed
write. The outage is the real migrated SQLite file moved away and back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from gateway.admin.service import TenantAdmin
from gateway.review import sampling
from gateway.review.sampling import MisfireSampler
from gateway.tenants import TenantStore
from tests.gateway.review.test_sample_tenant_gone import count, hit
from tests.gateway.test_calibration import migrated
from tests.gateway.test_calibration_outage import Outage


def test_a_sample_written_during_an_outage_lands_when_the_database_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sampling, "WRITE_RETRY_SECONDS", (0.3, 0.3, 0.3))
    db = migrated(tmp_path)
    store = TenantStore(db)
    TenantAdmin(store, None, None).add_tenant("tests", "acme", None)
    sampler = MisfireSampler(db, upstream=None, embedder=None)  # type: ignore[arg-type]
    served = hit("acme", store.namespace_id("acme"))
    outage = Outage(db, tmp_path / "cal.db")

    async def during(back_after: float | None) -> None:
        outage.start()
        task = asyncio.create_task(sampler._process(served))
        if back_after is not None:
            await asyncio.sleep(back_after)
            outage.end()
        await task
        if back_after is None:
            outage.end()

    asyncio.run(during(0.5))  # back within the retries: written once
    with Session(db) as s:
        assert count(s) == 1
    assert sampler.samples.labels("written")._value.get() == 1
    asyncio.run(during(None))  # the control: away past every retry, an error, as before
    with Session(db) as s:
        assert count(s) == 1
    assert sampler.samples.labels("error")._value.get() == 1
    db.dispose()
