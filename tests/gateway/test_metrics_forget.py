"""A deleted tenant's series go when the change feed names it (gateway/metrics.py
``forget_deleted``), and so do those of a tenant deleted and created again under its id
before this replica heard of the delete: the series count the namespace minted when
they began (``saw``, called as each request authenticates), and a new one is another
tenant (a review, session 50: the old tenant's counts showed in the new one's stats)."""

from __future__ import annotations

from prometheus_client import generate_latest

from gateway.metrics import GatewayMetrics
from tests.gateway.conftest import metric

NAME = "cachegate_concurrency_refused_total"


def refused(m: GatewayMetrics, tenant: str) -> float:
    return metric(generate_latest(m.registry).decode(), NAME, tenant=tenant)


def counted(tenants: dict[str, str]) -> GatewayMetrics:
    m = GatewayMetrics()
    for tenant_id, namespace in tenants.items():
        m.saw(tenant_id, namespace)
        m.concurrency_refused.labels(tenant_id).inc(3)
    return m


def test_a_tenant_created_again_under_its_id_starts_from_zero() -> None:
    m = counted({"acme": "ns-1", "other": "ns-2"})
    minted = {"acme": "ns-9", "other": "ns-2"}  # acme deleted and created again
    m.forget_deleted({"acme", "other"}, lambda t: minted.get(t, ""))
    assert refused(m, "acme") == 0
    assert refused(m, "other") == 3  # the control: the same tenant keeps its counts
    m.saw("acme", "ns-9")  # the new tenant's own series begin
    m.concurrency_refused.labels("acme").inc()
    m.forget_deleted({"acme"}, lambda t: minted.get(t, ""))
    assert refused(m, "acme") == 1  # and are kept while it stays


def test_a_deleted_tenant_is_forgotten_and_one_never_seen_is_read_as_before() -> None:
    m = counted({"gone": "ns-1"})
    m.concurrency_refused.labels("unseen").inc(2)  # counted before any saw(): no namespace
    m.forget_deleted({"gone", "unseen"}, lambda t: "ns-5" if t == "unseen" else "")
    assert refused(m, "gone") == 0
    assert refused(m, "unseen") == 2
    m.saw("legacy", "")  # a context without a minted id records none: read as before
    m.concurrency_refused.labels("legacy").inc()
    m.forget_deleted({"legacy"}, lambda t: "ns-7")
    assert refused(m, "legacy") == 1
