"""Tenant policies through the admin API, against a live gateway: versions and their
history, invalid policies refused with the version kept, bounds (the largest values
serve; stored values past them still serve), and If-Match on writes (a stale version
is a 412 and writes nothing)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gateway.models import PolicyVersion
from gateway.policy import MAX_RATE_LIMIT_RPM, MAX_TTL_SECONDS
from gateway.tenants import utc_now
from tests.gateway.admin.checks import check_policy_maxima
from tests.gateway.admin_support import completion, new_tenant
from tests.gateway.conftest import Gateway, assert_openai_error

pytestmark = pytest.mark.slow

JSON_TYPE = {"content-type": "application/json"}


def audit(client: httpx.Client, tenant: str, action: str) -> list[dict[str, Any]]:
    r = client.get("/audit", params={"tenant": tenant, "action": action})
    assert r.status_code == 200, r.text
    return list(r.json()["data"])


def test_policy_versions_and_history(client: httpx.Client) -> None:
    client.post("/tenants", json={"id": "pol"})
    start = client.get("/tenants/pol/policy").json()
    assert start["version"] == 0 and start["created_by"] is None
    assert start["policy"]["threshold"] == 0.89  # the defaults

    alice = {"X-Admin-Actor": "alice"}
    r = client.put(
        "/tenants/pol/policy", json={"threshold": 0.95, "ttl_seconds": 60}, headers=alice
    )
    assert r.status_code == 200, r.text
    assert r.json()["version"] == 1 and r.json()["created_by"] == "admin:alice"
    r = client.patch("/tenants/pol/policy", json={"sample_rate": 0.5})
    assert r.json()["version"] == 2
    kept = r.json()["policy"]
    assert kept["threshold"] == 0.95 and kept["ttl_seconds"] == 60 and kept["sample_rate"] == 0.5
    # PUT replaces the whole policy: omitted fields go back to their defaults.
    r = client.put("/tenants/pol/policy", json={"semantic_enabled": False})
    assert r.json()["version"] == 3 and r.json()["policy"]["threshold"] == 0.89

    history = client.get("/tenants/pol/policy/history").json()["data"]
    assert [h["version"] for h in history] == [3, 2, 1]
    assert [h["created_by"] for h in history] == ["admin", "admin", "admin:alice"]
    assert all(h["created_at"] for h in history)
    assert history[2]["policy"]["ttl_seconds"] == 60
    assert [h["version"] for h in client.get(
        "/tenants/pol/policy/history", params={"limit": 1}
    ).json()["data"]] == [3]  # fmt: skip
    assert client.get("/tenants/pol").json()["policy_version"] == 3

    events = audit(client, "pol", "policy.set")
    assert [e["target"] for e in events] == ["v3", "v2", "v1"]
    assert events[1]["details"]["changes"] == {"sample_rate": [0.05, 0.5]}
    assert events[2]["actor"] == "admin:alice"


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"threshold": 0}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": "high"}, "threshold"),
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"mode": "everything"}, "mode"),
        ({"guards": ["not_a_guard"]}, "guards"),
        ({"entity_kinds": ["shoe_size"]}, "entity_kinds"),
        ({"judge_band": {"low": 0.9, "high": 0.8}}, "judge_band"),
        ({"max_temperature": 3}, "max_temperature"),
        ({"sample_rate": -0.1}, "sample_rate"),
        ({"prefix_namespace": ""}, "prefix_namespace"),
        ({"kv_block_quota": 0}, "kv_block_quota"),
        ({"rate_limit_rpm": -5}, "rate_limit_rpm"),
        # Past the upper bounds: each was accepted, then failed every request of the
        # tenant (the rate limiter's float) or every backfill (a timedelta, or the
        # stored entry's INTEGER ttl_seconds on PostgreSQL).
        ({"rate_limit_rpm": 10**400}, "rate_limit_rpm"),
        ({"rate_limit_rpm": MAX_RATE_LIMIT_RPM + 1}, "rate_limit_rpm"),
        ({"ttl_seconds": 10**30}, "ttl_seconds"),
        ({"ttl_seconds": MAX_TTL_SECONDS + 1}, "ttl_seconds"),
        ({"kv_block_quota": 2**31}, "kv_block_quota"),
        ({"max_semantic_entries": 2**31}, "max_semantic_entries"),
        ({"max_semantic_partitions": 2**31}, "max_semantic_partitions"),
        ({"no_such_knob": True}, "no_such_knob"),
        # Of the wrong JSON type: each was coerced and stored (true as 1 request a
        # minute, 1 KV block, a threshold of 1.0; "yes" as a flag; "60" as a number).
        ({"rate_limit_rpm": True}, "rate_limit_rpm"),
        ({"kv_block_quota": True}, "kv_block_quota"),
        ({"ttl_seconds": True}, "ttl_seconds"),
        ({"ttl_seconds": "60"}, "ttl_seconds"),
        ({"threshold": True}, "threshold"),
        ({"sample_rate": True}, "sample_rate"),
        ({"semantic_enabled": "yes"}, "semantic_enabled"),
        ({"semantic_enabled": 0}, "semantic_enabled"),
        ({"judge_band": {"low": "0.1", "high": 0.9}}, "judge_band"),
    ],
)
def test_invalid_policies_are_refused_and_keep_the_version(
    client: httpx.Client, change: dict[str, Any], param: str
) -> None:
    if client.get("/tenants/pol-bad").status_code == 404:
        client.post("/tenants", json={"id": "pol-bad"})
    before = client.get("/tenants/pol-bad/policy").json()["version"]
    for method in ("PUT", "PATCH"):
        r = client.request(method, "/tenants/pol-bad/policy", json=change)
        err = assert_openai_error(r, 400, "invalid_request_error")
        assert (err["param"] or "").startswith(param), (method, err)
    assert client.get("/tenants/pol-bad/policy").json()["version"] == before
    # Positive control: a valid value of the same knob is accepted.
    assert client.patch("/tenants/pol-bad/policy", json={"sample_rate": 0.2}).status_code == 200


def test_policy_bodies_of_the_wrong_shape(client: httpx.Client) -> None:
    client.post("/tenants", json={"id": "pol-shape"})
    bodies: list[Any] = [[], "x", 3, None]
    for body in bodies:
        assert_openai_error(client.put("/tenants/pol-shape/policy", json=body), 400)
        assert_openai_error(client.patch("/tenants/pol-shape/policy", json=body), 400)
    for params in ({"limit": 0}, {"limit": "many"}):
        r = client.get("/tenants/pol-shape/policy/history", params=params)
        assert_openai_error(r, 400)
    assert client.get("/tenants/pol-shape/policy").json()["version"] == 0
    assert client.patch("/tenants/pol-shape/policy", json={}).json()["version"] == 1  # no-op ok


def test_values_json_cannot_write_back_are_refused_before_anything_is_stored(
    client: httpx.Client,
) -> None:
    """A lone surrogate in a topic was stored, then every read of the policy's history
    and of the audit log failed as a 500 (the response could not be encoded)."""
    client.post("/tenants", json={"id": "pol-unicode"})
    raw = [
        b'{"allowlist_topics": ["\\udc00 billing"]}',  # a lone surrogate escape
        b'{"prefix_namespace": "grp\\ud800"}',
        b'{"allowlist_topics": ["\xed\xa0\x80 billing"]}',  # a surrogate's own bytes
        b'{"sample_rate": 1e400}',  # inf
        b'{"sample_rate": NaN}',
        # inf without an exponent; and the first two in UTF-16, which json.loads reads
        # (NULs between the bytes hid them from the check before session 43)
        b'{"sample_rate": 1' + b"0" * 400 + b".0}",
        '{"allowlist_topics": ["\\udc00 billing"]}'.encode("utf-16-le"),
        '{"allowlist_topics": ["billing"]}'.encode("utf-16"),  # any UTF-16: not UTF-8
    ]
    for body in raw:
        for method in ("PUT", "PATCH"):
            r = client.request(
                method,
                "/tenants/pol-unicode/policy",
                content=body,
                headers={"content-type": "application/json"},
            )
            err = assert_openai_error(r, 400, "invalid_request_error")
            assert "udc00" not in err["message"] and "billing" not in err["message"]
    deep = b'{"sample_rate": ' + b"[" * 100_000 + b"1e5" + b"]" * 100_000 + b"}"
    r = client.patch("/tenants/pol-unicode/policy", content=deep, headers=JSON_TYPE)
    assert_openai_error(r, 400)  # nested past json's limit: FastAPI's 400, not a 500
    r = client.post("/tenants", content=b'{"id": "uni-x", "name": "\\udfff"}', headers=JSON_TYPE)
    assert_openai_error(r, 400)
    assert client.get("/tenants/uni-x").status_code == 404
    # nothing was written, and every read still answers
    assert client.get("/tenants/pol-unicode/policy").json()["version"] == 0
    assert client.get("/tenants/pol-unicode/policy/history").status_code == 200
    assert client.get("/audit").status_code == 200
    # positive control: the same fields with valid text (a real astral character too)
    ok = b'{"allowlist_topics": ["\\ud83d\\ude00 billing"], "sample_rate": 1e-1}'
    r = client.patch("/tenants/pol-unicode/policy", content=ok, headers=JSON_TYPE)
    assert r.status_code == 200, r.text
    assert r.json()["policy"]["allowlist_topics"] == ["\U0001f600 billing"]
    assert client.get("/tenants/pol-unicode/policy/history").status_code == 200


def test_policy_maxima_serve_and_store(gw: Gateway, client: httpx.Client) -> None:
    check_policy_maxima(gw, client, "pol-max")


def test_a_stored_policy_past_the_bounds_still_serves(gw: Gateway, client: httpx.Client) -> None:
    """A version written before the bounds existed is read as the bound, instead of a
    500 on every request of the tenant; so is one holding a NUL refused since."""
    key = new_tenant(client, "pol-old")
    with gw.tenants.sessions.begin() as s:
        stored = {
            "rate_limit_rpm": 10**400,
            "ttl_seconds": 10**30,
            "prefix_namespace": "grp\x00",
            "allowlist_topics": ["a\x00b"],
        }
        s.add(
            PolicyVersion(
                tenant_id="pol-old",
                version=1,
                policy=stored,
                created_at=utc_now(),
                created_by="old",
            )
        )
    gw.tenants.invalidate_cache()
    with gw.http(key) as http:  # through the rate limiter
        r = http.post("/v1/completions", json=completion(gw.model, "t5 t6 t7"))
        assert r.status_code == 200, r.text
    policy = client.get("/tenants/pol-old/policy").json()["policy"]
    bounds = (MAX_RATE_LIMIT_RPM, MAX_TTL_SECONDS)
    assert (policy["rate_limit_rpm"], policy["ttl_seconds"]) == bounds
    assert (policy["prefix_namespace"], policy["allowlist_topics"]) == ("grp", ["ab"])
    r = client.patch("/tenants/pol-old/policy", json={"sample_rate": 0.5})  # builds on it
    assert r.status_code == 200 and r.json()["version"] == 2, r.text


def test_if_match_writes_only_over_the_version_read(client: httpx.Client) -> None:
    """Two operators read version 1 and both write: the second, sent with If-Match,
    gets a 412 instead of silently undoing the first's change."""
    client.post("/tenants", json={"id": "pol-etag"})
    r = client.get("/tenants/pol-etag/policy")
    assert r.headers["etag"] == '"0"'
    r = client.patch("/tenants/pol-etag/policy", json={"sample_rate": 0.5})
    assert r.headers["etag"] == '"1"', r.headers
    read = client.get("/tenants/pol-etag/policy").headers["etag"]
    assert read == '"1"'

    first = client.patch(
        "/tenants/pol-etag/policy", json={"threshold": 0.95}, headers={"If-Match": read}
    )
    assert first.status_code == 200 and first.headers["etag"] == '"2"', first.text
    for method, body in (("PATCH", {"threshold": 0.8}), ("PUT", {"threshold": 0.8})):
        stale = client.request(
            method, "/tenants/pol-etag/policy", json=body, headers={"If-Match": read}
        )
        err = assert_openai_error(stale, 412, "invalid_request_error")
        assert err["code"] == "policy_version_mismatch"
    for tag in ('W/"2"', '"1", "3"'):  # weak, none current
        r = client.patch("/tenants/pol-etag/policy", json={}, headers={"If-Match": tag})
        assert_openai_error(r, 412)
    weak = client.patch("/tenants/pol-etag/policy", json={}, headers={"If-Match": 'W/"2"'})
    assert "weak entity tag" in weak.json()["error"]["message"]
    # unquoted, not a tag: a 400 that says so (a 412 "the policy changed" before, though
    # it had not: session 45's review)
    for tag in ("2", "garbage"):
        r = client.patch("/tenants/pol-etag/policy", json={}, headers={"If-Match": tag})
        err = assert_openai_error(r, 400)
        assert err["code"] == "invalid_if_match" and "quoted" in err["message"]
    current = client.get("/tenants/pol-etag/policy").json()
    assert current["version"] == 2 and current["policy"]["threshold"] == 0.95
    assert [e["target"] for e in audit(client, "pol-etag", "policy.set")] == ["v2", "v1"]

    # Positive controls: the current tag (alone or in a list), "*", or no header.
    r = client.put(
        "/tenants/pol-etag/policy", json={"threshold": 0.8}, headers={"If-Match": '"1", "2"'}
    )
    assert r.status_code == 200 and r.json()["version"] == 3, r.text
    r = client.patch("/tenants/pol-etag/policy", json={}, headers={"If-Match": "*"})
    assert r.json()["version"] == 4
    assert client.patch("/tenants/pol-etag/policy", json={}).json()["version"] == 5
    # An unknown tenant is a 404 whatever If-Match says.
    r = client.patch("/tenants/pol-none/policy", json={}, headers={"If-Match": "*"})
    assert_openai_error(r, 404)


def test_repeated_guards_and_entity_kinds_are_kept_once(client: httpx.Client) -> None:
    # 200,000 repeats were stored in every later policy version and audit event (a review)
    new_tenant(client, "pol-repeats")
    body = {"guards": ["high_risk", "personalized"] * 20_000, "entity_kinds": ["date"] * 9}
    r = client.put("/tenants/pol-repeats/policy", json=body)
    assert r.status_code == 200, r.text
    policy = r.json()["policy"]
    assert policy["guards"] == ["high_risk", "personalized"]  # order kept
    assert policy["entity_kinds"] == ["date"]
