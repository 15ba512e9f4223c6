"""Shadow verification does not thin the sampling (gateway/review/sampling.py).

A sample's task used to run its shadow request too, holding one of ``max_pending``
slots for the whole request (2 at once, up to 120 s each), so at sample rate 1.0 a
review saw 224 of 300 samples dropped, and the probability stored with each sample
was not the one it was drawn with. Now the sample is written and its task ends; the
shadow check runs apart, and past ``max_pending`` of them it is skipped and counted,
never the sample. Real migrated SQLite; the shadow request is a stand-in that waits.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gateway.admin.service import TenantAdmin
from gateway.models import MisfireSample
from gateway.review.sampling import MisfireSampler
from gateway.tenants import TenantStore
from tests.gateway.review.test_sample_tenant_gone import hit
from tests.gateway.test_calibration import migrated


def test_samples_are_written_while_shadow_checks_wait(tmp_path: Path) -> None:
    db = migrated(tmp_path)
    store = TenantStore(db)
    TenantAdmin(store, None, None).add_tenant("tests", "acme", None)
    sampler = MisfireSampler(db, upstream=None, embedder=None, shadow=True, max_pending=4)  # type: ignore[arg-type]
    verified: list[int] = []

    async def slow_verify(sample_id: int, _hit: Any) -> None:
        await asyncio.sleep(0.5)  # a shadow request of the model, slow
        verified.append(sample_id)

    sampler._verify = slow_verify  # type: ignore[method-assign,assignment]
    served = hit("acme", store.namespace_id("acme"))

    async def run() -> float:
        started = time.monotonic()
        await asyncio.gather(*(sampler._process(served) for _ in range(10)))
        written_in = time.monotonic() - started
        await sampler.drain(10)
        return written_in

    written_in = asyncio.run(run())
    with Session(db) as s:
        assert s.scalar(select(func.count()).select_from(MisfireSample)) == 10  # every one
    assert written_in < 0.5  # the writes did not wait for a shadow request
    assert len(verified) == 4  # four shadow checks ran; the other six were skipped
    assert sampler.verdicts.labels("skipped")._value.get() == 6
    db.dispose()
