"""The gateway end to end, per tenant: isolation of the semantic and prefix layers,
Cache-Control, authentication and disabled tenants, policy changes and the
Prometheus counters. Runs against the same live gateway as test_e2e.py (the
session-scoped ``e2e_gw`` fixture in conftest.py: real SmolLM2, the real
embedder, a real SQLite file); every test makes its own tenant.
"""

from __future__ import annotations

import httpx
import openai
import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from gateway.models import ApiKey, Tenant
from gateway.policy import TenantPolicy
from gateway.tenants import utc_now
from tests.gateway.conftest import (
    LONG_SYSTEM,
    Gateway,
    assert_openai_error,
    cached_tokens,
    chat_body,
    metric,
)
from tests.gateway.e2e_support import (
    CAPITAL,
    CAPITAL_PARAPHRASES,
    CHAT,
    engine_requests,
    post,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def gw(e2e_gw: Gateway) -> Gateway:
    """The session's end-to-end gateway (tests/gateway/conftest.py), built once for
    test_e2e*.py."""
    return e2e_gw


# ----------------------------------------------------------------- tenant isolation


def test_tenant_isolation_semantic_and_prefix(gw: Gateway) -> None:
    a_id, a_key = gw.tenant("iso-a")
    b_id, b_key = gw.tenant("iso-b")
    body = chat_body(gw.model, CAPITAL)
    with gw.http(a_key) as a, gw.http(b_key) as b:
        stored = post(a, body)
        assert stored.headers["x-cachegate-backfill"] == "stored"
        control = post(a, body)  # positive control: A's own entry is served to A
        assert control.headers["x-cachegate-cache"] == "semantic-hit"
        assert control.headers["x-cachegate-similarity"] == "1.0000"

        ran = engine_requests(gw)
        other = post(b, body)  # the identical question from tenant B
        assert other.headers["x-cachegate-semantic"] == "miss:empty"
        assert other.headers["x-cachegate-cache"] != "semantic-hit"
        assert "x-cachegate-similarity" not in other.headers
        assert engine_requests(gw) == ran + 1  # B was answered by the model

        # Prefix layer: A reuses its own long system prompt (positive control) ...
        sys_a1 = post(a, chat_body(gw.model, "How do disputes work?", LONG_SYSTEM, 4))
        sys_a2 = post(a, chat_body(gw.model, "Are transfers instant?", LONG_SYSTEM, 4))
        assert cached_tokens(sys_a1) == 0
        a_reused = cached_tokens(sys_a2)
        assert a_reused >= 64
        # ... but B's identical prompt finds nothing from A's namespace.
        sys_b = post(b, chat_body(gw.model, "Are transfers instant?", LONG_SYSTEM, 4))
        assert cached_tokens(sys_b) == 0
        assert sys_b.headers["x-cachegate-cached-tokens"] == "0"
        assert sys_b.headers["x-cachegate-cache"] == "miss"
        # B's own second request then reuses B's blocks: the namespace works for B too.
        sys_b2 = post(b, chat_body(gw.model, "How do disputes work?", LONG_SYSTEM, 4))
        assert cached_tokens(sys_b2) == a_reused
    text = gw.metrics()
    assert metric(text, "cachegate_semantic_hits_total", tenant=a_id) == 1
    assert metric(text, "cachegate_semantic_hits_total", tenant=b_id) == 0


def test_a_recreated_tenant_id_is_never_served_the_old_tenants_answers(gw: Gateway) -> None:
    # A request authenticated before its tenant was deleted can backfill after the
    # delete dropped the tenant's entries; the admin service here has no cache, so the
    # old entry stays just as such a late backfill would leave it.
    tenant_id, key = gw.tenant("again-sem")
    body = chat_body(gw.model, CAPITAL)
    with gw.http(key) as c:
        assert post(c, body).headers["x-cachegate-backfill"] == "stored"
        control = post(c, body)  # positive control: the tenant's own entry
        assert control.headers["x-cachegate-cache"] == "semantic-hit"
    old_namespace = gw.namespace(tenant_id)
    gw.admin.delete("tests", tenant_id)
    gw.admin.add_tenant("tests", tenant_id, None)
    assert gw.namespace(tenant_id) != old_namespace
    with gw.http(gw.admin.issue_key("tests", tenant_id, "k").key) as c:
        again = post(c, body)
        # before the fix: a semantic hit on the deleted tenant's answer
        assert again.headers["x-cachegate-semantic"] == "miss:empty", again.headers
        assert again.headers["x-cachegate-backfill"] == "stored"
        assert post(c, body).headers["x-cachegate-cache"] == "semantic-hit"  # its own


def test_two_tenants_sending_one_request_id_each_get_their_own_answer(gw: Gateway) -> None:
    # X-Request-Id is the client's to choose: it must not key the engine's output
    # streams, or a second request under a live id failed (500) and one sent just
    # after the first client left could receive that client's remaining tokens.
    (_, a_key), (_, b_key) = gw.tenant("rid-a"), gw.tenant("rid-b")
    same = {"x-request-id": "shared-id-1", "cache-control": "no-store, no-cache"}
    long = chat_body(gw.model, "Write a very long story about a dragon.", max_tokens=64)
    long |= {"stream": True, "ignore_eos": True}
    short = chat_body(gw.model, "Hi", system=None, max_tokens=3)
    with gw.http(b_key) as b:
        alone = b.post(CHAT, json=short, headers=same)  # B's answer with nothing else live
    assert alone.status_code == 200, alone.text
    with gw.http(a_key) as a, gw.http(b_key) as b:
        with a.stream("POST", CHAT, json=long, headers=same) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")  # A's request is live in the engine
            during = b.post(CHAT, json=short, headers=same)
            assert during.status_code == 200, during.text  # before the fix: 500
            rest = [line for line in lines if line.startswith("data: ")]
        assert rest[-1] == "data: [DONE]"
    assert during.headers["x-request-id"] == "shared-id-1"  # still the client's own id
    for field in ("prompt_tokens", "completion_tokens"):  # B's prompt, not A's
        assert during.json()["usage"][field] == alone.json()["usage"][field]
    assert during.json()["choices"] == alone.json()["choices"]


def test_the_gateways_database_errors_never_carry_bound_values(gw: Gateway) -> None:
    # A backfill or sample that fails is logged with its exception: SQLAlchemy would
    # write the statement's values (the question, the answer) into that message.
    secret = "what is the balance of account 4417 for jane doe"
    for engine in (gw.tenants.engine, gw.cache.entries.engine):
        with pytest.raises(sa_exc.DBAPIError) as failed, engine.begin() as conn:
            conn.execute(text("INSERT INTO no_such_table VALUES (:q)"), {"q": secret})
        assert "no_such_table" in str(failed.value) and secret not in str(failed.value)


def test_the_partition_holds_the_in_process_models_weights(gw: Gateway) -> None:
    # Other weights under the same model name start empty partitions (seed 003).
    upstream = gw.state.upstream
    assert upstream.engine is not None
    digest = upstream.engine.fingerprint.weights_digest
    assert len(digest) == 64
    assert gw.state.pipeline.model_revisions == {gw.model: digest[:16]}


# ----------------------------------------------------------------- cache controls


def test_cache_control_no_cache_skips_the_lookup(gw: Gateway) -> None:
    tenant, key = gw.tenant("nocache")
    body = chat_body(gw.model, "What is the tallest mountain on Earth?", max_tokens=12)
    canned = "CANNED ANSWER FROM THE CACHE"
    query = gw.query(tenant, body)
    stored = gw.cache.store(
        query,
        {
            "id": "chatcmpl-canned",
            "object": "chat.completion",
            "model": gw.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": canned},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
        },
        TenantPolicy().semantic_policy(),
    )
    assert stored.stored
    client = gw.openai(key)
    ran = engine_requests(gw)
    bypass = client.chat.completions.with_raw_response.create(
        model=gw.model,
        messages=body["messages"],
        max_tokens=12,
        temperature=0,
        extra_headers={"Cache-Control": "no-cache"},
    )
    assert bypass.headers["x-cachegate-semantic"] == "skipped:no-cache"
    assert bypass.headers["x-cachegate-cache"] == "bypass"
    assert bypass.parse().choices[0].message.content != canned
    assert engine_requests(gw) == ran + 1
    # Positive control: the same request without the header is served the stored answer.
    hit = client.chat.completions.with_raw_response.create(
        model=gw.model, messages=body["messages"], max_tokens=12, temperature=0
    )
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    assert hit.parse().choices[0].message.content == canned


def test_cache_control_no_store_skips_the_backfill(gw: Gateway) -> None:
    tenant, key = gw.tenant("nostore")
    body = chat_body(gw.model, "Who wrote Romeo and Juliet?")
    with gw.http(key) as http:
        first = post(http, body, **{"Cache-Control": "no-store"})
        assert first.headers["x-cachegate-backfill"] == "skipped:no-store"
        assert first.json()["choices"][0]["finish_reason"] == "stop"  # it was cacheable
        assert gw.semantic_verdict(tenant, body) == "empty"
        second = post(http, body)  # nothing was stored: a miss, answered by the model
        assert second.headers["x-cachegate-semantic"] == "miss:empty"
        assert second.headers["x-cachegate-backfill"] == "stored"
        third = post(http, body)  # positive control: now it is cached
        assert third.headers["x-cachegate-cache"] == "semantic-hit"


# ----------------------------------------------------------------- auth and policy


def test_authentication_and_disabled_tenant(gw: Gateway) -> None:
    body = chat_body(gw.model, CAPITAL)
    with httpx.Client(base_url=gw.url, timeout=30) as anon:
        err = assert_openai_error(anon.post(CHAT, json=body), 401, "invalid_request_error")
        assert err["code"] == "invalid_api_key"
        wrong = {"Authorization": "Bearer cg-not-a-real-key"}
        assert_openai_error(anon.post(CHAT, json=body, headers=wrong), 401)
        basic = {"Authorization": "Basic dXNlcjpwYXNz"}
        assert_openai_error(anon.post(CHAT, json=body, headers=basic), 401)
    with pytest.raises(openai.AuthenticationError):
        gw.openai("cg-not-a-real-key").models.list()

    tenant, key = gw.tenant("off")
    assert len(gw.openai(key).models.list().data) == 1
    with gw.tenants.sessions.begin() as s:
        row = s.get(Tenant, tenant)
        assert row is not None
        row.disabled = True
    gw.tenants.invalidate_cache()
    with gw.http(key) as http:
        err = assert_openai_error(http.post(CHAT, json=body), 403, "permission_error")
        assert tenant in err["message"]
        assert_openai_error(http.get("/v1/models"), 403)
    with pytest.raises(openai.PermissionDeniedError):
        gw.openai(key).models.list()

    # A revoked key is refused at once (after the cache is dropped), a new one works.
    other, other_key = gw.tenant("revoke")
    assert len(gw.openai(other_key).models.list().data) == 1
    with gw.tenants.sessions.begin() as s:
        for api_key in s.query(ApiKey).filter(ApiKey.tenant_id == other):
            api_key.revoked_at = utc_now()
    gw.tenants.invalidate_cache()
    with pytest.raises(openai.AuthenticationError):
        gw.openai(other_key).models.list()
    assert len(gw.openai(gw.admin.issue_key("tests", other, "test").key).models.list().data) == 1


def test_policy_change_takes_effect_on_the_next_request(gw: Gateway) -> None:
    tenant, key = gw.tenant("policy")
    original = chat_body(gw.model, CAPITAL)
    paraphrase = chat_body(gw.model, CAPITAL_PARAPHRASES[0])  # similarity 0.957
    with gw.http(key) as http:
        assert post(http, original).headers["x-cachegate-backfill"] == "stored"
        assert post(http, paraphrase).headers["x-cachegate-cache"] == "semantic-hit"

        gw.policies.set_policy("tests", tenant, TenantPolicy(semantic_enabled=False))
        ran = engine_requests(gw)
        off = post(http, paraphrase)
        assert off.headers["x-cachegate-semantic"] == "skipped:policy"
        assert off.headers["x-cachegate-cache"] != "semantic-hit"
        assert off.headers["x-cachegate-backfill"] == "skipped:not_cacheable"
        assert engine_requests(gw) == ran + 1

        gw.policies.set_policy("tests", tenant, TenantPolicy(threshold=0.99))
        strict = post(http, paraphrase)
        assert strict.headers["x-cachegate-semantic"] == "miss:below_threshold"
        assert engine_requests(gw) == ran + 2
        exact = post(http, original)  # 1.0 still clears 0.99
        assert exact.headers["x-cachegate-cache"] == "semantic-hit"

        gw.policies.set_policy("tests", tenant, TenantPolicy(max_temperature=0.5))
        hot = post(http, chat_body(gw.model, CAPITAL, max_tokens=8) | {"temperature": 0.9})
        assert hot.headers["x-cachegate-semantic"] == "skipped:temperature"


# ----------------------------------------------------------------- metrics


def test_metrics_count_hits_misses_backfills_and_prefix_tokens(gw: Gateway) -> None:
    tenant, key = gw.tenant("metrics")
    before = gw.metrics()
    with gw.http(key) as http:
        post(http, chat_body(gw.model, "How do disputes work?", LONG_SYSTEM, 4))
        reuse = post(http, chat_body(gw.model, "Are transfers instant?", LONG_SYSTEM, 4))
        post(http, chat_body(gw.model, CAPITAL))
        post(http, chat_body(gw.model, CAPITAL))
    after = gw.metrics()
    reused = cached_tokens(reuse)
    assert reused >= 64

    def grew(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert grew("cachegate_semantic_hits_total", tenant=tenant) == 1
    assert grew("cachegate_semantic_misses_total", tenant=tenant, reason="empty") >= 1
    assert grew("cachegate_backfills_total", tenant=tenant, result="stored") == 1
    assert grew("cachegate_backfills_total", tenant=tenant, result="skipped") == 2  # truncated
    assert grew("cachegate_requests_total", tenant=tenant, cache="semantic-hit") == 1
    assert grew("cachegate_requests_total", tenant=tenant, cache="prefix-hit") >= 1
    assert grew("cachegate_prefix_hit_tokens_total", tenant=tenant) >= reused
    assert grew("cachegate_prefix_query_tokens_total", tenant=tenant) > reused
    assert grew("cachegate_request_latency_seconds_count", tenant=tenant, layer="semantic") == 1
    assert grew("cachegate_request_latency_seconds_count", tenant=tenant, layer="upstream") == 3
    assert grew("cachegate_time_to_first_token_seconds_count", tenant=tenant) == 4
    # The engine's own series sit beside them on the same page.
    assert grew("prefix_cache_hits_total") >= reused
    assert grew("prefix_cache_queries_total") > grew("prefix_cache_hits_total")
    assert grew("prefix_requests_total") == 3
