"""``cachegate_misfire_target_rate`` follows each labelled tenant's policy through the
change feed (gateway/metrics.py ``follow_targets``): a change names the tenant, and a
rebuild names none, which means every tenant (the diff review of session 47: a rebuild
refreshed nothing). A tenant whose policy cannot be read keeps its value and does not
stop the others'. The live path (label, policy change, feed) is
tests/gateway/test_saved_metrics.py."""

from __future__ import annotations

from prometheus_client import generate_latest

from gateway.metrics import GatewayMetrics
from tests.gateway.conftest import metric

NAME = "cachegate_misfire_target_rate"


def exported(m: GatewayMetrics, tenant: str) -> float:
    return metric(generate_latest(m.registry).decode(), NAME, tenant=tenant)


def test_a_rebuild_refreshes_every_labelled_tenant() -> None:
    m = GatewayMetrics()
    m.set_misfire_target("a", 0.01)
    m.set_misfire_target("b", 0.01)
    targets = {"a": 0.05, "b": 0.02, "c": 0.5}
    m.follow_targets(frozenset({"a"}), targets.get)  # a change names its tenant
    assert (exported(m, "a"), exported(m, "b")) == (0.05, 0.01)
    m.follow_targets(frozenset(), targets.get)  # a rebuild names none: all of them
    assert (exported(m, "a"), exported(m, "b")) == (0.05, 0.02)
    assert f'{NAME}{{tenant="c"}}' not in generate_latest(m.registry).decode()  # no label


def test_one_unreadable_policy_stops_no_other() -> None:
    m = GatewayMetrics()
    m.set_misfire_target("a", 0.01)
    m.set_misfire_target("b", 0.01)

    def target_of(tenant: str) -> float | None:
        if tenant == "a":
            raise ConnectionError("the database is away")
        return 0.03

    m.follow_targets(frozenset({"a", "b"}), target_of)
    assert (exported(m, "a"), exported(m, "b")) == (0.01, 0.03)
    m.forget_tenant("b")  # deleted: its series goes, and a rebuild does not bring it back
    m.follow_targets(frozenset(), target_of)
    assert f'{NAME}{{tenant="b"}}' not in generate_latest(m.registry).decode()


def test_a_target_read_before_a_followed_change_is_not_set() -> None:
    # A label's handler reads the target on a thread; the feed follows a policy change
    # before it sets the gauge: the older value would undo the change, so it is refused
    # and read again (the diff review of session 47).
    m = GatewayMetrics()
    m.set_misfire_target("a", 0.01)
    read_at = m.target_changes
    m.follow_targets(frozenset({"a"}), {"a": 0.05}.get)  # the change, followed meanwhile
    assert not m.set_misfire_target("a", 0.01, read_at)  # the label's older read
    assert exported(m, "a") == 0.05
    assert m.set_misfire_target("a", 0.05, m.target_changes)  # read again: set
