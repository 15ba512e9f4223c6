"""Issue 14: ``/metrics`` needs the metrics token when one is set, and its tenant
labels are digests of the tenant ids unless an operator asks for the ids."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from gateway.app import Components
from gateway.errors import AuthenticationError
from gateway.metrics import GatewayMetrics, tenant_label
from gateway.metrics_auth import require_metrics_token
from prefix.model.loader import LoadedModel
from tests.gateway.admin_support import ADMIN_TOKEN, admin
from tests.gateway.conftest import (
    Gateway,
    assert_openai_error,
    chat_body,
    gateway_settings,
    metric,
    running_gateway,
    smol_engine,
)

pytestmark = pytest.mark.slow

TOKEN = "metrics-secret-token"


@pytest.fixture(scope="module")
def gw(smol_loaded: LoadedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("gateway-metrics-access")
    settings = gateway_settings(
        data_dir,
        semantic_enabled=False,
        metrics_token=TOKEN,
        metrics_tenant_labels="digest",  # the production default
        admin_token=ADMIN_TOKEN,
    )
    parts = Components(engine=smol_engine(smol_loaded, num_blocks=32))
    with running_gateway(settings, parts) as gateway:
        yield gateway


def test_metrics_need_the_token(gw: Gateway) -> None:
    assert_openai_error(httpx.get(f"{gw.url}/metrics", timeout=10), 401)
    wrong = {"Authorization": "Bearer not-the-token"}
    assert_openai_error(httpx.get(f"{gw.url}/metrics", headers=wrong, timeout=10), 401)
    tenant_key = {"Authorization": f"Bearer {gw.tenant('m')[1]}"}  # a tenant key is not it
    assert_openai_error(httpx.get(f"{gw.url}/metrics", headers=tenant_key, timeout=10), 401)
    ok = httpx.get(f"{gw.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert ok.status_code == 200 and "cachegate_requests_total" in ok.text


def test_tenant_labels_are_keyed_digests_by_default(gw: Gateway) -> None:
    tenant, key = gw.tenant("secret-customer")
    with gw.http(key) as c:
        r = c.post("/v1/chat/completions", json=chat_body(gw.model, "Hi", max_tokens=1))
    assert r.status_code == 200, r.text
    text = httpx.get(
        f"{gw.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    ).text
    assert tenant not in text and "secret-customer" not in text
    with admin(gw) as client:
        stats = client.get(f"/tenants/{tenant}/cache/stats")
    assert stats.status_code == 200, stats.text
    label = stats.json()["metrics_label"]  # how an operator finds a tenant's series
    assert label.startswith("t-") and len(label) == 14
    assert metric(text, "cachegate_requests_total", tenant=label) == 1  # the series is there
    # Keyed: a guessed tenant id hashed by anyone who reads /metrics is not the label;
    # the key is the database's shared secret, so every replica (and restart) agrees.
    assert label != tenant_label(tenant)
    shared_key = gw.tenants.server_secret("metrics_label")
    assert label == tenant_label(tenant, "digest", shared_key)


def test_digest_is_stable_and_id_mode_shows_ids() -> None:
    assert tenant_label("acme") == tenant_label("acme") != tenant_label("acme2")
    digest, ids = GatewayMetrics("digest"), GatewayMetrics("id")
    for m in (digest, ids):
        m.requests.labels("acme", "miss").inc()
    assert digest.registry.get_sample_value(
        "cachegate_requests_total", {"tenant": tenant_label("acme"), "cache": "miss"}
    )
    assert (
        digest.registry.get_sample_value(
            "cachegate_requests_total", {"tenant": "acme", "cache": "miss"}
        )
        is None
    )
    # Positive control: an operator who opts in sees the ids.
    assert (
        ids.registry.get_sample_value(
            "cachegate_requests_total", {"tenant": "acme", "cache": "miss"}
        )
        == 1.0
    )


def request_with(authorization: str | None) -> object:
    headers = {} if authorization is None else {"authorization": authorization}
    return types.SimpleNamespace(headers=headers)


def test_an_empty_metrics_token_closes_metrics() -> None:
    """CACHEGATE_METRICS_TOKEN= (empty) matched a bare "Bearer": /metrics was open (a
    review, session 41); it is closed now, as an empty admin token closes the admin API."""
    for sent in ("Bearer", "Bearer ", None, "Bearer x"):
        with pytest.raises(AuthenticationError):
            require_metrics_token(request_with(sent), SecretStr(""))  # type: ignore[arg-type]
    require_metrics_token(request_with("Bearer tok"), SecretStr("tok"))  # type: ignore[arg-type]
    require_metrics_token(request_with(None), None)  # type: ignore[arg-type]  # unset: open
