"""A gateway restarted with another embedder keeps its cache: each partition an earlier
embedder wrote is carried over on its tenant's first request (semantic/migrate.py,
gateway/proxy/pipeline.py), so MiniLM's entries are served again under ``auto``.
Real gateway, real SQLite, real MiniLM and e5, a scripted upstream."""

from __future__ import annotations

import time
from pathlib import Path

from gateway.app import Components
from gateway.policy import TenantPolicy
from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.admin_support import ADMIN_TOKEN, admin
from tests.gateway.conftest import (
    Gateway,
    chat_body,
    gateway_settings,
    metric,
    running_gateway,
    wait_until,
)
from tests.gateway.scripted_upstream import scripted_upstream

#: Each tenant's own question (the scripted upstream's answer names it, so the two
#: answers differ) and a paraphrase of tenant A's.
STORED_A = "How do I reset my password?"
ASKED_A = "How can I reset my password?"
STORED_B = "How do I close my account?"


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
        settings = gateway_settings(tmp_path, upstream_url=up.url, admin_token=ADMIN_TOKEN)
        with running_gateway(settings, Components(embedder=embedder)) as first:
            tenant_a, key_a = first.tenant("switch-a", policy)
            key_b = first.tenant("switch-b", policy)[1]
            assert ask(first, key_a, STORED_A)[0].startswith("miss")
            assert ask(first, key_a, ASKED_A)[0] == "hit"  # positive control under MiniLM
            assert ask(first, key_b, STORED_B)[0].startswith("miss")
            answer_a = ask(first, key_a, STORED_A)[1]
            header, answer_b = ask(first, key_b, STORED_B)
            assert header == "hit" and answer_a != answer_b
            assert first.state.pipeline.migrator is not None
            assert not first.state.pipeline.migrator.is_active  # one embedder: nothing to do

        routed = RoutedEmbedder(embedder, E5Embedder(progress=False))
        with running_gateway(settings, Components(embedder=routed)) as second:
            migrator = second.state.pipeline.migrator
            assert migrator is not None and migrator.sources == (embedder.embedder_id,)
            assert second.cache.entries.count(embedder_id=embedder.embedder_id) == 2
            # a dry run (explain) moves nothing: it only reads
            with admin(second) as client:
                body = {"body": chat_body(rec.MODEL, ASKED_A)}
                r = client.post(f"/tenants/{tenant_a}/cache/explain", json=body)
            assert r.status_code == 200 and r.json()["decision"] == "miss"
            time.sleep(0.5)
            assert second.cache.entries.count(embedder_id=embedder.embedder_id) == 2
            # The first ask of the partition finds the index without it, and carries it.
            assert ask(second, key_a, ASKED_A)[0].startswith("miss")
            # carried once tenant A's old row is gone (the move deletes and writes at once)
            assert wait_until(
                lambda: second.cache.entries.count(embedder_id=embedder.embedder_id) == 1
            )
            # the stored question itself: the carried entry answers (the miss above
            # backfilled its own phrasing beside it)
            assert ask(second, key_a, STORED_A) == ("hit", answer_a)
            # tenant B asking tenant A's question: its own partition, not A's, answers
            assert ask(second, key_b, STORED_A)[0].startswith("miss")
            assert wait_until(
                lambda: second.cache.entries.count(embedder_id=embedder.embedder_id) == 0
            )
            assert ask(second, key_b, STORED_B) == ("hit", answer_b)
            written = "cachegate_semantic_migrated_entries_total"
            assert wait_until(lambda: metric(second.metrics(), written, outcome="written") == 2)
            assert wait_until(lambda: not migrator.is_active)  # nothing left to do
