"""Issue 14: a deleted tenant whose id is created again starts with no prefix KV.

The namespace includes an id minted at creation (``tenants.namespace_id``), so
the old tenant's blocks are unreachable by key: through the real in-process
SmolLM2 engine, the re-created tenant's first request reuses nothing, while the
original tenant (the positive control) did reuse its own prefix.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.app import Components
from prefix.model.loader import LoadedModel
from tests.gateway.conftest import (
    LONG_SYSTEM,
    Gateway,
    cached_tokens,
    chat_body,
    gateway_settings,
    metric,
    running_gateway,
    smol_engine,
)

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def gw(smol_loaded: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("gateway-recreate")
    settings = gateway_settings(data_dir, semantic_enabled=False)
    with running_gateway(settings, Components(engine=smol_engine(smol_loaded))) as gateway:
        yield gateway


def _ask(gw: Gateway, key: str) -> int:
    body = chat_body(gw.model, "When do card disputes expire?", system=LONG_SYSTEM, max_tokens=1)
    with gw.http(key) as c:
        r = c.post(CHAT, json=body)
    assert r.status_code == 200, r.text
    return cached_tokens(r)


def test_a_recreated_tenant_id_inherits_no_prefix_kv(gw: Gateway) -> None:
    tenant_id = f"again-{uuid.uuid4().hex[:8]}"
    gw.admin.add_tenant("tests", tenant_id, None)
    first_ns = gw.tenants.namespace_id(tenant_id)
    key = gw.admin.issue_key("tests", tenant_id, "k").key
    assert _ask(gw, key) == 0
    reused = _ask(gw, key)
    assert reused >= 4 * 16  # positive control: the tenant reuses its own prefix blocks

    gw.admin.delete("tests", tenant_id)
    gw.admin.add_tenant("tests", tenant_id, None)
    assert gw.tenants.namespace_id(tenant_id) not in ("", first_ns)
    # Deleted and created again through the store, as another replica would: this
    # replica's series are still the old tenant's until the change feed names it, and
    # then they go though the id exists again (a review, session 50)
    requests = metric(gw.metrics(), "cachegate_requests_total", tenant=tenant_id)
    new_key = gw.admin.issue_key("tests", tenant_id, "k").key
    assert requests == 2
    gw.state.metrics.forget_deleted({tenant_id}, gw.tenants.namespace_id)
    assert metric(gw.metrics(), "cachegate_requests_total", tenant=tenant_id) == 0
    assert _ask(gw, new_key) == 0  # before the fix: the old tenant's blocks were reused
    assert _ask(gw, new_key) == reused  # and it builds its own cache like any tenant
    gw.state.metrics.forget_deleted({tenant_id}, gw.tenants.namespace_id)  # the control:
    assert metric(gw.metrics(), "cachegate_requests_total", tenant=tenant_id) == 2  # kept


def test_every_tenant_gets_its_own_minted_namespace(gw: Gateway) -> None:
    a, _ = gw.tenant("ns")
    b, _ = gw.tenant("ns")
    na, nb = gw.tenants.namespace_id(a), gw.tenants.namespace_id(b)
    assert len(na) == 32 and len(nb) == 32 and na != nb
