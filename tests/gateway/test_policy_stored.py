"""A stored policy version this build cannot read never fails its tenant (session 46's
review: a field a newer replica wrote made every request of the tenant a 500, and the
admin API's reads and the write that would have replaced it too).

An unknown field is left out; a known one whose value cannot be read takes its default
and turns the semantic layer off (a default could share more than the operator chose)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi import Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import update

from gateway.app import Components
from gateway.models import PolicyVersion
from gateway.policy import TenantPolicy
from semantic import Embedder
from tests.gateway.admin_support import ADMIN_TOKEN, admin
from tests.gateway.conftest import gateway_settings, running_gateway
from tests.gateway.proxy.relay.support import CHAT, Scripted, answer, ask
from tests.live_server import serving


def test_an_unknown_field_is_left_out_and_the_semantic_layer_is_off() -> None:
    # it may be a field that narrows sharing (the diff review): read safe, marked
    policy = TenantPolicy.from_stored({"threshold": 0.95, "future_knob": True})
    assert policy.threshold == 0.95 and not policy.semantic_enabled
    assert policy.is_read_degraded
    control = TenantPolicy.from_stored({"threshold": 0.95})
    assert control.semantic_enabled and not control.is_read_degraded


@pytest.mark.parametrize(
    "stored",
    [
        {"threshold": "high", "ttl_seconds": 60},
        {"mode": "sideways", "ttl_seconds": 60},
        {"judge_band": {"low": 0.9, "high": 0.1}, "ttl_seconds": 60},  # fails as a whole
    ],
)
def test_an_unreadable_value_takes_its_default_and_the_semantic_layer_is_off(
    stored: dict[str, Any],
) -> None:
    policy = TenantPolicy.from_stored(stored)
    assert not policy.semantic_enabled and policy.is_read_degraded
    assert policy.threshold == TenantPolicy().threshold and policy.mode == "guarded"
    if "judge_band" not in stored:  # the readable fields are kept
        assert policy.ttl_seconds == 60
    readable = TenantPolicy.from_stored({"ttl_seconds": 60})  # control
    assert readable.semantic_enabled and readable.ttl_seconds == 60


@pytest.mark.parametrize("stored", [None, [1, 2], "policy"])
def test_a_stored_value_that_is_no_object_reads_as_defaults(stored: object) -> None:
    policy = TenantPolicy.from_stored(stored)
    assert policy.model_dump() == TenantPolicy(semantic_enabled=False).model_dump()
    assert policy.is_read_degraded


def test_the_tenant_is_served_and_the_admin_can_replace_it(
    embedder: Embedder, tmp_path: Path
) -> None:
    up = Scripted()

    async def handler(body: dict[str, Any], request: Request) -> Response:
        return JSONResponse(answer("Paris."))

    up.handler = handler
    with serving(up.app()) as url:
        up.url = url
        settings = gateway_settings(tmp_path, upstream_url=url, admin_token=ADMIN_TOKEN)
        with running_gateway(settings, Components(embedder=embedder)) as gw:
            tid, key = gw.tenant("stored", TenantPolicy(threshold=0.9))
            other_key = gw.tenant("control")[1]
            with gw.tenants.sessions.begin() as session:
                row = session.query(PolicyVersion).filter_by(tenant_id=tid).one()
                newer = dict(row.policy) | {"future_knob": True, "threshold": "high"}
                stmt = update(PolicyVersion).where(PolicyVersion.id == row.id)
                session.execute(stmt.values(policy=newer))
            gw.tenants.invalidate_cache([tid])
            question = ask("What is the capital of France?")
            with gw.http(key) as http:
                served = [http.post(CHAT, json=question) for _ in range(2)]
            with admin(gw) as client:
                shown = client.get(f"/tenants/{tid}/policy")
                history = client.get(f"/tenants/{tid}/policy/history")
                # a PATCH would store the defaults read in as the operator's choice
                patched = client.patch(f"/tenants/{tid}/policy", json={"ttl_seconds": 60})
                replaced = client.put(f"/tenants/{tid}/policy", json={"threshold": 0.95})
            gw.tenants.invalidate_cache([tid])
            with gw.http(key) as http:
                after = [http.post(CHAT, json=question) for _ in range(2)]
            with gw.http(other_key) as http:
                control = http.post(CHAT, json=question)
    assert [r.status_code for r in served] == [200, 200], served[0].text
    # read with the semantic layer off: answered by the upstream both times, not stored
    assert all(r.headers["x-cachegate-cache"] != "semantic-hit" for r in served)
    assert shown.status_code == 200 and shown.json()["policy"]["semantic_enabled"] is False
    assert "future_knob" not in json.dumps(shown.json())
    assert history.status_code == 200, history.text
    assert patched.status_code == 400 and patched.json()["error"]["code"] == "policy_unreadable"
    assert replaced.status_code == 200, replaced.text
    assert [r.status_code for r in after] == [200, 200]
    assert after[1].headers["x-cachegate-cache"] == "semantic-hit"  # the new version reads
    assert control.status_code == 200
