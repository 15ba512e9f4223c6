"""Every replica re-tags the old misfire samples at its start (gateway/review/retag.py),
so on a shared PostgreSQL they do it together: each sample is re-tagged once, and
once they are done every one carries its language's id. Real PostgreSQL; the real
verifier decides the language of each pair."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gateway.models import MisfireSample
from gateway.review.retag import retag_legacy_samples
from gateway.verification import GatewayVerifier, load_verifier
from semantic.store_db import make_engine
from tests.gateway.review.old_samples import old_sample
from tests.gateway.sync.conftest import pg_bare_url, pg_server, pg_url  # noqa: F401

PAIRS = [
    ("How do I reset my password?", "How can I reset my password?", "en"),
    ("怎么修改登录密码", "如何更改我的登录密码", "zh"),
]


@pytest.fixture(scope="module")
def verifier() -> GatewayVerifier:
    return load_verifier(dtype="float32")


@pytest.mark.postgres
def test_replicas_retagging_together_retag_each_sample_once(
    pg_url: str,  # noqa: F811
    verifier: GatewayVerifier,
) -> None:
    db = make_engine(pg_url)
    legacy = verifier.legacy_scale_id
    with Session(db) as s, s.begin():
        for i in range(120):
            question, matched, _lang = PAIRS[i % 2]
            s.add(old_sample(f"t{i % 3}", question, matched, legacy))
    counts: list[int] = []
    start = threading.Barrier(3)

    def replica() -> None:
        start.wait()
        counts.append(retag_legacy_samples(db, legacy, verifier.scale_id_of, batch_size=7))

    threads = [threading.Thread(target=replica) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(counts) == 3 and sum(counts) == 120, counts  # each once, none lost
    with Session(db) as s:
        by_id = dict(
            s.execute(
                select(MisfireSample.verifier_model, func.count()).group_by(
                    MisfireSample.verifier_model
                )
            ).all()
        )
    assert by_id == {verifier.en_scale_id: 60, verifier.zh_scale_id: 60}
    db.dispose()
