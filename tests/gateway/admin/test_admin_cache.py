"""Cache operations through the admin API against a live gateway with the real
embedder and validators: policy changes effective on the next request,
invalidation (all / partition / entry; never another tenant's), per-tenant
stats, and the dry-run explain (hit with its score, entity mismatch with the
comparison, another tenant's empty partition), each beside its positive control.
Entries are seeded through the real cache, as a backfill would store them."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway.app import Components
from prefix.model.loader import LoadedModel
from semantic import Embedder
from tests.gateway.admin_support import (
    ADMIN_TOKEN,
    CAPITAL,
    CAPITAL_PARAPHRASE,
    SEND_100,
    SEND_900,
    admin,
    chat,
    completion,
    new_tenant,
    seed,
    tiny_engine,
)
from tests.gateway.conftest import Gateway, assert_openai_error, gateway_settings, running_gateway

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


def post(http: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
    r = http.post(path, json=body)
    assert r.status_code == 200, r.text
    return r


def explain(client: httpx.Client, tenant: str, **req: Any) -> dict[str, Any]:
    r = client.post(f"/tenants/{tenant}/cache/explain", json=req)
    assert r.status_code == 200, r.text
    return dict(r.json())


def entry_ids(client: httpx.Client, tenant: str, **params: Any) -> set[int]:
    r = client.get(f"/tenants/{tenant}/cache/entries", params=params)
    assert r.status_code == 200, r.text
    return {e["id"] for e in r.json()["data"]}


# ----------------------------------------------------------------- policy, next request


def test_policy_changes_apply_to_the_next_request(gw: Gateway, client: httpx.Client) -> None:
    key = new_tenant(client, "live-policy")
    seed(gw, "live-policy", completion(gw.model, CAPITAL))
    paraphrase = completion(gw.model, CAPITAL_PARAPHRASE)
    with gw.http(key) as http:
        assert post(http, COMPLETIONS, paraphrase).headers["x-cachegate-cache"] == "semantic-hit"

        assert client.patch("/tenants/live-policy/policy", json={"semantic_enabled": False})
        off = post(http, COMPLETIONS, paraphrase)  # the engine answers now
        assert off.headers["x-cachegate-semantic"] == "skipped:policy"
        assert off.headers["x-cachegate-cache"] == "miss"

        client.patch("/tenants/live-policy/policy", json={"semantic_enabled": True})
        assert post(http, COMPLETIONS, paraphrase).headers["x-cachegate-cache"] == "semantic-hit"

        client.patch("/tenants/live-policy/policy", json={"threshold": 0.99})
        strict = post(http, COMPLETIONS, paraphrase)
        assert strict.headers["x-cachegate-semantic"] == "miss:below_threshold"
        exact = post(http, COMPLETIONS, completion(gw.model, CAPITAL))  # 1.0 clears 0.99
        assert exact.headers["x-cachegate-cache"] == "semantic-hit"

        # 白名单场景: only allowlisted topics are served from the cache.
        allow = {"threshold": 0.89, "mode": "allowlist", "allowlist_topics": ["weather"]}
        client.patch("/tenants/live-policy/policy", json=allow)
        listed = post(http, COMPLETIONS, paraphrase)
        assert listed.headers["x-cachegate-semantic"] == "skipped:not_allowlisted"
        client.patch("/tenants/live-policy/policy", json={"allowlist_topics": ["capital"]})
        assert post(http, COMPLETIONS, paraphrase).headers["x-cachegate-cache"] == "semantic-hit"

        client.patch("/tenants/live-policy/policy", json={"max_temperature": 0.5})
        hot = post(http, COMPLETIONS, paraphrase | {"temperature": 0.9})
        assert hot.headers["x-cachegate-semantic"] == "skipped:temperature"
    assert client.get("/tenants/live-policy/policy").json()["version"] == 6


# ----------------------------------------------------------------- invalidation


def test_invalidate_all_partition_and_entry(gw: Gateway, client: httpx.Client) -> None:
    key = new_tenant(client, "inv")
    new_tenant(client, "inv-other")
    capital = seed(gw, "inv", chat(gw.model, CAPITAL))
    send = seed(gw, "inv", chat(gw.model, SEND_100))
    other_partition = seed(gw, "inv", chat(gw.model, CAPITAL, max_tokens=7))  # other params
    foreign = seed(gw, "inv-other", chat(gw.model, CAPITAL))
    assert entry_ids(client, "inv") == {capital, send, other_partition}
    assert entry_ids(client, "inv-other") == {foreign}
    entries = client.get("/tenants/inv/cache/entries").json()["data"]
    partition = next(e["partition_key"] for e in entries if e["id"] == capital)
    assert entry_ids(client, "inv", partition_key=partition) == {capital, send}

    # One entry: gone from the database and the index; the next request misses it.
    r = client.delete(f"/tenants/inv/cache/entries/{send}")
    assert r.status_code == 200 and r.json() == {
        "tenant_id": "inv", "scope": "entry", "target": str(send), "removed": 1,
    }  # fmt: skip
    assert entry_ids(client, "inv") == {capital, other_partition}
    with gw.http(key) as http:
        assert post(http, CHAT, chat(gw.model, CAPITAL)).headers["x-cachegate-cache"] == (
            "semantic-hit"
        )  # positive control: the untouched entry still serves
    assert_openai_error(client.delete(f"/tenants/inv/cache/entries/{send}"), 404)

    # Another tenant's entry or partition is out of reach of this tenant's routes.
    err = assert_openai_error(client.delete(f"/tenants/inv/cache/entries/{foreign}"), 404)
    assert err["code"] == "entry_not_found"
    foreign_partition = client.get("/tenants/inv-other/cache/entries").json()["data"][0][
        "partition_key"
    ]
    r = client.delete(f"/tenants/inv/cache/partitions/{foreign_partition}")
    assert r.status_code == 200 and r.json()["removed"] == 0
    assert entry_ids(client, "inv-other") == {foreign}
    assert gw.semantic_verdict("inv-other", chat(gw.model, CAPITAL)) is None

    # One partition of the tenant: the other partition stays.
    r = client.delete(f"/tenants/inv/cache/partitions/{partition}")
    assert r.json() == {"tenant_id": "inv", "scope": "partition", "target": partition, "removed": 1}
    assert entry_ids(client, "inv") == {other_partition}
    assert gw.semantic_verdict("inv", chat(gw.model, CAPITAL)) == "empty"

    # Everything of the tenant; the other tenant keeps its entry.
    r = client.delete("/tenants/inv/cache")
    assert r.json() == {"tenant_id": "inv", "scope": "all", "target": None, "removed": 1}
    assert entry_ids(client, "inv") == set()
    assert entry_ids(client, "inv-other") == {foreign}
    assert client.delete("/tenants/inv/cache").json()["removed"] == 0

    events = client.get("/audit", params={"tenant": "inv", "action": "cache.invalidate"}).json()
    assert [(e["details"]["scope"], e["details"]["removed"]) for e in events["data"]] == [
        ("all", 0), ("all", 1), ("partition", 1), ("partition", 0), ("entry", 1),
    ]  # fmt: skip


def test_cache_routes_refuse_invalid_input(client: httpx.Client) -> None:
    client.post("/tenants", json={"id": "inv-bad"})
    for path in ("/tenants/ghost/cache", "/tenants/ghost/cache/entries/1",
                 "/tenants/ghost/cache/partitions/abc"):  # fmt: skip
        assert_openai_error(client.delete(path), 404)
    assert_openai_error(client.get("/tenants/ghost/cache/entries"), 404)
    assert_openai_error(client.get("/tenants/ghost/cache/stats"), 404)
    for bad in ("0", "-3", "abc", "1.5", str(2**63)):
        assert_openai_error(client.delete(f"/tenants/inv-bad/cache/entries/{bad}"), 400)
    assert_openai_error(client.delete(f"/tenants/inv-bad/cache/partitions/{'a' * 65}"), 400)
    for params in ({"limit": 0}, {"limit": "x"}, {"partition_key": "p" * 65}):
        assert_openai_error(client.get("/tenants/inv-bad/cache/entries", params=params), 400)
    assert client.get("/tenants/inv-bad/cache/entries").json()["data"] == []  # control


# ----------------------------------------------------------------- stats


def test_stats_count_this_tenants_requests_only(gw: Gateway, client: httpx.Client) -> None:
    key = new_tenant(client, "stats")
    other_key = new_tenant(client, "stats-other")
    seed(gw, "stats", chat(gw.model, CAPITAL))
    prompt = completion(gw.model, " ".join(f"t{i}" for i in range(10, 50)))
    with gw.http(key) as http:
        post(http, CHAT, chat(gw.model, CAPITAL_PARAPHRASE))
        first = post(http, COMPLETIONS, prompt)
        second = post(http, COMPLETIONS, prompt)
    with gw.http(other_key) as http:
        post(http, COMPLETIONS, prompt)
    stats = client.get("/tenants/stats/cache/stats").json()
    # The tenant's id, then the id minted when it was created (never reused).
    assert stats["prefix_namespace"].startswith("tenant:stats:")
    assert stats["semantic"] | {"misses_by_reason": None, "backfills_by_result": None} == {
        "enabled": True, "entries": 1, "partitions": 1, "hits": 1.0,
        "misses_by_reason": None, "backfills_by_result": None,
    }  # fmt: skip
    assert stats["requests_by_cache"] == {"semantic-hit": 1.0, "miss": 1.0, "prefix-hit": 1.0}
    used = first.json()["usage"]["prompt_tokens"] + second.json()["usage"]["prompt_tokens"]
    reused = second.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert reused > 0
    assert stats["prefix"] == {
        "query_tokens": used, "hit_tokens": reused, "token_hit_rate": pytest.approx(reused / used),
    }  # fmt: skip
    other = client.get("/tenants/stats-other/cache/stats").json()
    assert other["prefix"]["hit_tokens"] == 0  # its own namespace: the same prompt was cold
    assert other["requests_by_cache"] == {"miss": 1.0}
    assert other["semantic"]["entries"] == 0


# ----------------------------------------------------------------- explain


def test_explain_a_hit_without_counting_it(gw: Gateway, client: httpx.Client) -> None:
    key = new_tenant(client, "why")
    stored = seed(gw, "why", chat(gw.model, CAPITAL))
    body = chat(gw.model, CAPITAL_PARAPHRASE)
    report = explain(client, "why", body=body)
    assert report["decision"] == "hit" and report["would_hit"] is True
    assert report["reason"] is None and report["served_entry_id"] == stored
    assert report["threshold"] == 0.89 and report["partition_size"] == 1
    assert report["best_score"] == pytest.approx(0.957, abs=0.01)
    (candidate,) = report["candidates"]
    assert candidate["entry_id"] == stored and candidate["question"] == CAPITAL
    assert candidate["above_threshold"] and candidate["refusal"] is None
    assert report["entity_comparison"]["matches"] is True
    assert all(step["passed"] for step in report["steps"]), report["steps"]
    assert gw.cache.get_entry(stored).hit_count == 0  # a dry run: nothing counted
    assert gw.cache.get_entry(stored).last_hit_at is None
    with gw.http(key) as http:  # and the real request agrees
        r = post(http, CHAT, body)
    assert r.headers["x-cachegate-cache"] == "semantic-hit"
    assert float(r.headers["x-cachegate-similarity"]) == pytest.approx(report["best_score"], 1e-3)
    assert gw.cache.get_entry(stored).hit_count == 1
    assert report["partition_key"] == gw.cache.get_entry(stored).partition_key


def test_explain_names_the_entity_mismatch(gw: Gateway, client: httpx.Client) -> None:
    new_tenant(client, "why-amount")
    stored = seed(gw, "why-amount", chat(gw.model, SEND_100))
    report = explain(client, "why-amount", body=chat(gw.model, SEND_900))
    assert report["decision"] == "miss" and report["would_hit"] is False
    assert report["reason"] == "entity_mismatch:amount"
    comparison = report["entity_comparison"]
    assert comparison["entry_id"] == stored and comparison["mismatch_kind"] == "amount"
    assert comparison["kinds"]["amount"] == {
        "verdict": "mismatch", "left": ["EUR:900"], "right": ["EUR:100"],
    }  # fmt: skip
    (candidate,) = report["candidates"]
    assert candidate["above_threshold"] and candidate["refusal"] == "entity_mismatch:amount"
    assert report["steps"][-1] == {
        "check": "validators", "passed": False, "detail": "entity_mismatch:amount",
    }  # fmt: skip
    # The real lookup gives the same reason; the same question is a hit (control).
    assert gw.semantic_verdict("why-amount", chat(gw.model, SEND_900)) == report["reason"]
    assert explain(client, "why-amount", body=chat(gw.model, SEND_100))["would_hit"] is True
    # An operator may drop the kind from the policy: then the entry would be served.
    client.patch("/tenants/why-amount/policy", json={"entity_kinds": ["date", "identifier"]})
    relaxed = explain(client, "why-amount", body=chat(gw.model, SEND_900))
    assert relaxed["would_hit"] is True and "amount" not in relaxed["entity_comparison"]["kinds"]


@pytest.mark.parametrize(
    ("tenant", "stored_text", "asked", "kind", "check"),
    [
        (
            "why-asked",
            "When is the next bus to the airport?",
            "Where is the next bus to the airport?",
            "polarity",
            "asks_for_other",
        ),
        (
            "why-counts",
            "Can I have two cards on one bank account?",
            "Can I have one card on two accounts?",
            "number",
            "swapped_counts",
        ),
    ],
)
def test_explain_names_a_check_of_the_pair(
    gw: Gateway,
    client: httpx.Client,
    tenant: str,
    stored_text: str,
    asked: str,
    kind: str,
    check: str,
) -> None:
    """A refusal by a check of the two texts together names its kind and the check
    (before session 49 the comparison said the entities matched)."""
    new_tenant(client, tenant)
    stored = seed(gw, tenant, chat(gw.model, stored_text))
    report = explain(client, tenant, body=chat(gw.model, asked))
    assert report["reason"] == f"entity_mismatch:{kind}", report
    comparison = report["entity_comparison"]
    assert comparison["entry_id"] == stored and comparison["matches"] is False
    assert comparison["mismatch_kind"] == kind and comparison["pair_check"] == check
    assert gw.semantic_verdict(tenant, chat(gw.model, asked)) == report["reason"]
    same = explain(client, tenant, body=chat(gw.model, stored_text))  # control
    assert same["would_hit"] is True and same["entity_comparison"]["pair_check"] is None


def test_explain_other_tenant_sees_an_empty_partition(gw: Gateway, client: httpx.Client) -> None:
    new_tenant(client, "why-a")
    new_tenant(client, "why-b")
    seed(gw, "why-a", chat(gw.model, CAPITAL))
    mine = explain(client, "why-a", body=chat(gw.model, CAPITAL))
    theirs = explain(client, "why-b", body=chat(gw.model, CAPITAL))
    assert mine["would_hit"] is True and mine["best_score"] == pytest.approx(1.0)
    assert theirs["decision"] == "miss" and theirs["reason"] == "empty"
    assert theirs["partition_size"] == 0 and theirs["candidates"] == []
    assert theirs["partition_key"] != mine["partition_key"]


def test_explain_skips_guards_and_the_question_form(gw: Gateway, client: httpx.Client) -> None:
    new_tenant(client, "why-skip")
    # The question form builds a chat body with the served model and no parameters.
    seed(gw, "why-skip", {"model": gw.model, "messages": [{"role": "user", "content": CAPITAL}]})
    assert explain(client, "why-skip", question=CAPITAL_PARAPHRASE)["would_hit"] is True
    assert explain(client, "why-skip", question=CAPITAL, endpoint="completion")["reason"] == "empty"
    guarded = explain(client, "why-skip", question="What is the weather today?")
    assert guarded["decision"] == "miss" and guarded["reason"] == "guarded:time_sensitive"
    hot = explain(client, "why-skip", body=chat(gw.model, CAPITAL, temperature=1.5))
    assert hot["decision"] == "skipped" and hot["reason"] == "temperature"
    tool_turn = chat(gw.model, CAPITAL)
    tool_turn["messages"].append({"role": "assistant", "content": "Let me check."})
    unc = explain(client, "why-skip", body=tool_turn)
    assert unc["decision"] == "skipped" and unc["reason"].startswith("uncacheable:")
    client.patch("/tenants/why-skip/policy", json={"semantic_enabled": False})
    off = explain(client, "why-skip", question=CAPITAL_PARAPHRASE)
    assert off["decision"] == "skipped" and off["reason"] == "policy"
    client.post("/tenants/why-skip/disable")
    assert explain(client, "why-skip", question=CAPITAL)["reason"] == "tenant_disabled"


@pytest.mark.parametrize(
    "req",
    [
        {},
        {"question": CAPITAL, "body": {"model": "m", "messages": []}},
        {"question": ""},
        {"question": CAPITAL, "top_k": 0},
        {"question": CAPITAL, "top_k": 51},
        {"question": CAPITAL, "endpoint": "embeddings"},
        {"question": CAPITAL, "unknown": 1},
        {"body": {"model": "m"}},  # no messages
        {"body": {"model": "m", "messages": "hi"}},
        {"body": {"model": "m", "messages": [{"role": "user", "content": 5}]}},
        {"body": {"model": "m", "prompt": {"a": 1}}, "endpoint": "completion"},
        {"body": []},
    ],
)
def test_explain_refuses_invalid_requests(client: httpx.Client, req: dict[str, Any]) -> None:
    if client.get("/tenants/why-bad").status_code == 404:
        client.post("/tenants", json={"id": "why-bad"})
    r = client.post("/tenants/why-bad/cache/explain", json=req)
    assert_openai_error(r, 400, "invalid_request_error")


def test_explain_unknown_tenant(client: httpx.Client) -> None:
    r = client.post("/tenants/ghost/cache/explain", json={"question": CAPITAL})
    assert assert_openai_error(r, 404)["code"] == "tenant_not_found"


def test_cache_routes_with_the_semantic_layer_off(
    tiny_llama: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> None:
    data_dir = tmp_path_factory.mktemp("admin-no-semantic")
    settings = gateway_settings(data_dir, admin_token=ADMIN_TOKEN, semantic_enabled=False)
    parts = Components(engine=tiny_engine(tiny_llama), embedder=embedder)
    with running_gateway(settings, parts) as off, admin(off) as client:
        key = new_tenant(client, "plain")
        with off.http(key) as http:
            r = post(http, COMPLETIONS, completion(off.model, "t5 t6 t7"))
        assert r.headers["x-cachegate-semantic"] == "skipped:disabled"
        report = explain(client, "plain", question=CAPITAL)
        assert report["decision"] == "skipped" and report["reason"] == "disabled"
        assert client.delete("/tenants/plain/cache").json()["removed"] == 0
        assert client.get("/tenants/plain/cache/entries").json()["data"] == []
        stats = client.get("/tenants/plain/cache/stats").json()
        assert stats["semantic"]["enabled"] is False and stats["semantic"]["entries"] == 0
        assert stats["prefix"]["query_tokens"] == r.json()["usage"]["prompt_tokens"]
        deleted = client.delete("/tenants/plain").json()
        assert deleted["semantic_entries_removed"] == 0 and deleted["keys_removed"] == 1


def test_explain_for_a_user_scoped_tenant_names_the_user(gw: Gateway, client: httpx.Client) -> None:
    """Under semantic_scope "user" explain always answered skipped (no_user), whatever
    the body said (a review, session 41): it now takes ``user`` (or the body's)."""
    new_tenant(client, "why-user", {"semantic_scope": "user"})
    alice = json.dumps([gw.namespace("why-user"), "user", "alice"])  # as the route keys it
    seed(gw, "why-user", chat(gw.model, CAPITAL), namespace=alice)
    body = chat(gw.model, CAPITAL_PARAPHRASE)
    alone = explain(client, "why-user", body=body)
    assert (alone["decision"], alone["reason"]) == ("skipped", "no_user")
    assert explain(client, "why-user", body=body, user="alice")["would_hit"] is True
    assert explain(client, "why-user", body=body | {"user": "alice"})["would_hit"] is True
    other = explain(client, "why-user", body=body, user="bob")  # another user: own partition
    assert other["would_hit"] is False and other["reason"] == "empty"
