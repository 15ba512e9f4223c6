"""Explain cannot drift from serving: for one request of each kind (a hit, below the
threshold, an entity mismatch, an expired entry, a guard refusal, an empty partition,
skipped by policy, by temperature, off the allowlist) the decision the admin API's
explain reports is the decision the real request then gets, through a live gateway
with the real embedder and validators. Explain runs first each time, so it must also
leave the cache as it found it. And the partition key the lookup computes is the one
the backfill stores under."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from gateway.proxy.controls import CacheControl
from gateway.tenants import TenantContext
from protocol.responses import response_body, usage
from semantic import SemanticPolicy
from semantic.errors import EntryNotFoundError
from tests.gateway.admin_support import (
    CAPITAL,
    CAPITAL_PARAPHRASE,
    SEND_100,
    SEND_900,
    completion,
    new_tenant,
    seed,
)
from tests.gateway.conftest import Gateway

pytestmark = pytest.mark.slow

COMPLETIONS = "/v1/completions"  # the tiny Llama answers these; misses reach the engine


def explained(client: httpx.Client, tenant: str, body: dict[str, Any]) -> dict[str, Any]:
    r = client.post(
        f"/tenants/{tenant}/cache/explain", json={"body": body, "endpoint": "completion"}
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def served(gw: Gateway, key: str, body: dict[str, Any]) -> httpx.Response:
    with gw.http(key) as http:
        r = http.post(COMPLETIONS, json=body)
    assert r.status_code == 200, r.text
    return r


def as_header(report: dict[str, Any]) -> str:
    """Explain's decision as the serving path writes it in ``x-cachegate-semantic``."""
    decision, reason = report["decision"], report["reason"]
    return str(decision) if reason is None else f"{decision}:{reason}"


def seed_expiring(gw: Gateway, tenant: str, body: dict[str, Any]) -> int:
    query = gw.query(tenant, body)
    answer = response_body("completion", "seed-1", body["model"], "Paris.", "stop", usage(9, 2, 0))
    result = gw.cache.store(query, answer, SemanticPolicy(ttl_seconds=1))
    assert result.entry_id is not None
    time.sleep(1.2)  # the gateway's clock is the wall clock
    return result.entry_id


CASES: list[tuple[str, dict[str, Any], str | None, str, str]] = [
    # (case, policy, seeded question, asked question, expected x-cachegate-semantic)
    ("hit", {}, CAPITAL, CAPITAL_PARAPHRASE, "hit"),
    ("below", {"threshold": 0.99}, CAPITAL, CAPITAL_PARAPHRASE, "miss:below_threshold"),
    ("entity", {}, SEND_100, SEND_900, "miss:entity_mismatch:amount"),
    ("expired", {}, CAPITAL, CAPITAL_PARAPHRASE, "miss:expired"),
    ("guard", {}, CAPITAL, "What is the weather today?", "miss:guarded:time_sensitive"),
    ("empty", {}, None, CAPITAL, "miss:empty"),
    ("policy", {"semantic_enabled": False}, CAPITAL, CAPITAL_PARAPHRASE, "skipped:policy"),
    ("hot", {"max_temperature": 0.0}, CAPITAL, CAPITAL_PARAPHRASE, "skipped:temperature"),
    ("allowlist", {"mode": "allowlist", "allowlist_topics": ["weather"]}, CAPITAL,
     CAPITAL_PARAPHRASE, "skipped:not_allowlisted"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "policy", "stored", "asked", "expected"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_explain_reports_the_decision_serving_makes(
    gw: Gateway,
    client: httpx.Client,
    case: str,
    policy: dict[str, Any],
    stored: str | None,
    asked: str,
    expected: str,
) -> None:
    tenant = f"drift-{case}"
    key = new_tenant(client, tenant, policy or None)
    entry_id = None
    if stored is not None:
        body = completion(gw.model, stored)
        entry_id = seed_expiring(gw, tenant, body) if case == "expired" else seed(gw, tenant, body)
    request = completion(gw.model, asked, temperature=0.5 if case == "hot" else 0)
    report = explained(client, tenant, request)
    if entry_id is not None:  # explain is a dry run: the entry is untouched
        entry = gw.cache.get_entry(entry_id)
        assert entry.hit_count == 0 and entry.last_hit_at is None
    r = served(gw, key, request)
    assert as_header(report) == r.headers["x-cachegate-semantic"] == expected
    assert report["would_hit"] is (r.headers["x-cachegate-cache"] == "semantic-hit")
    if expected == "hit":
        assert entry_id is not None and report["served_entry_id"] == entry_id
        assert gw.cache.get_entry(entry_id).hit_count == 1  # serving counted it
        similarity = float(r.headers["x-cachegate-similarity"])
        assert similarity == pytest.approx(report["best_score"], abs=1e-3)
    else:
        assert report["served_entry_id"] is None
    if case == "expired":  # explain left it; serving deleted it
        assert entry_id is not None and report["partition_size"] == 1
        with pytest.raises(EntryNotFoundError):
            gw.cache.get_entry(entry_id)


def test_the_backfill_stores_under_the_key_the_lookup_computed(
    gw: Gateway, client: httpx.Client
) -> None:
    new_tenant(client, "drift-key")
    policy, version = gw.tenants.policy("drift-key")
    minted = gw.tenants.namespace_id("drift-key")  # as authentication builds it
    ctx = TenantContext("drift-key", "drift-key", policy, version, minted)
    body = completion(gw.model, SEND_100)
    pipeline = gw.state.pipeline
    decision = asyncio.run(pipeline.lookup(ctx, "completion", body, CacheControl()))
    assert decision.header == "miss:empty" and decision.query is not None
    assert decision.result is not None
    carried = decision.result.partition_key
    assert carried == gw.cache.partition_key(decision.query)
    answer = response_body("completion", "c-1", gw.model, "Yes.", "stop", usage(9, 2, 0))
    assert asyncio.run(pipeline.backfill(ctx, decision, CacheControl(), answer)) == "stored"
    (entry,) = [e for e in gw.cache.entries.iter_entries() if e.tenant == "drift-key"]
    assert entry.partition_key == carried
    assert explained(client, "drift-key", body)["partition_key"] == carried
    # Another parameter set is another partition (the key is not a constant).
    other = completion(gw.model, SEND_100, max_tokens=7)
    assert explained(client, "drift-key", other)["partition_key"] != carried


def test_explain_reads_the_cache_object_as_serving_does(gw: Gateway, client: httpx.Client) -> None:
    """The body's ``cache`` object leaves it before the lookup, on both paths: its
    namespace narrows the partition explained (left in the body, it changed the key,
    and a question cached under a namespace was explained as a miss), and one that
    serving refuses is refused by explain too."""
    tenant = "drift-cache-object"
    key = new_tenant(client, tenant)
    namespace = json.dumps([gw.namespace(tenant), "client", "team-a"], ensure_ascii=False)
    entry_id = seed(gw, tenant, completion(gw.model, CAPITAL), namespace=namespace)
    asked = completion(gw.model, CAPITAL_PARAPHRASE) | {"cache": {"namespace": "team-a"}}
    report = explained(client, tenant, dict(asked))
    assert (report["decision"], report["served_entry_id"]) == ("hit", entry_id)
    r = served(gw, key, dict(asked))
    assert r.headers["x-cachegate-semantic"] == as_header(report) == "hit"
    # The control: without the namespace, the tenant's own partition holds nothing.
    bare = completion(gw.model, CAPITAL_PARAPHRASE)
    assert as_header(explained(client, tenant, bare)) == "miss:empty"
    bad = client.post(
        f"/tenants/{tenant}/cache/explain",
        json={"body": bare | {"cache": {"ttl": -1}}, "endpoint": "completion"},
    )
    assert r.status_code == 200 and bad.status_code == 400
    assert bad.json()["error"]["param"] == "cache.ttl"
