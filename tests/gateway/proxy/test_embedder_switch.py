"""A gateway restarted with another embedder keeps its cache: each partition an earlier
embedder wrote is carried over on its tenant's first request (semantic/migrate.py,
gateway/proxy/pipeline.py), so MiniLM's entries are served again under ``auto``.
Real gateway, real SQLite, real MiniLM and e5, a scripted upstream."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.app import Components
from gateway.policy import TenantPolicy
from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.conftest import (
    Gateway,
    chat_body,
    gateway_settings,
    metric,
    running_gateway,
    wait_until,
)
from tests.gateway.scripted_upstream import scripted_upstream

STORED = "How do I reset my password?"
ASKED = "How can I reset my password?"


def ask(gw: Gateway, key: str, question: str) -> tuple[str, str]:
    """(x-cachegate-semantic, the answer's text)."""
    with gw.http(key) as http:
        r = http.post("/v1/chat/completions", json=chat_body(rec.MODEL, question))
    assert r.status_code == 200, r.text
    return r.headers["x-cachegate-semantic"], r.json()["choices"][0]["message"]["content"]


def test_a_switch_to_auto_carries_each_partition_over_on_first_ask(
    embedder: Embedder, tmp_path: Path
) -> None:
    policy = TenantPolicy(sample_rate=0.0)
    with scripted_upstream("vllm") as up:
        settings = gateway_settings(tmp_path, upstream_url=up.url)
        with running_gateway(settings, Components(embedder=embedder)) as first:
            tenant_a, key_a = first.tenant("switch-a", policy)
            tenant_b, key_b = first.tenant("switch-b", policy)
            for key in (key_a, key_b):
                assert ask(first, key, STORED)[0].startswith("miss")
                assert ask(first, key, ASKED)[0] == "hit"  # positive control under MiniLM
            answer_a = ask(first, key_a, STORED)[1]
            answer_b = ask(first, key_b, STORED)[1]
            assert first.state.pipeline.migrator is not None
            assert not first.state.pipeline.migrator.is_active  # one embedder: nothing to do

        routed = RoutedEmbedder(embedder, E5Embedder(progress=False))
        with running_gateway(settings, Components(embedder=routed)) as second:
            migrator = second.state.pipeline.migrator
            assert migrator is not None and migrator.sources == (embedder.embedder_id,)
            assert second.cache.entries.count(embedder_id=embedder.embedder_id) == 2
            # The first ask of the partition finds the index without it, and carries it.
            assert ask(second, key_a, ASKED)[0].startswith("miss")
            # carried once tenant-a's old row is dropped (written before it is)
            assert wait_until(
                lambda: second.cache.entries.count(embedder_id=embedder.embedder_id) == 1
            )
            # the stored question itself: the carried entry answers (the miss above
            # backfilled its own phrasing beside it)
            assert ask(second, key_a, STORED) == ("hit", answer_a)
            # tenant-b was not asked for: its entry is still the old embedder's, and the
            # tenant-a partition now under auto does not answer for it
            assert ask(second, key_b, ASKED)[0].startswith("miss")
            assert wait_until(
                lambda: second.cache.entries.count(embedder_id=embedder.embedder_id) == 0
            )
            assert ask(second, key_b, STORED) == ("hit", answer_b)
            written = metric(
                second.metrics(), "cachegate_semantic_migrated_entries_total", outcome="written"
            )
            # each tenant's one stored question (the miss under auto may store one more)
            assert written == pytest.approx(2)
            assert {tenant_a, tenant_b}  # both tenants exist throughout
