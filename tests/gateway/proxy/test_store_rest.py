"""The rest after a store failure: one call tries after it, the others keep resting."""

from __future__ import annotations

import pytest

from gateway.metrics import GatewayMetrics
from gateway.proxy import store_rest
from gateway.proxy.store_rest import StoreRest
from semantic.errors import StoreUnavailableError


def test_a_failure_rests_then_lets_one_call_try(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(store_rest.time, "monotonic", lambda: clock[0])
    metrics = GatewayMetrics()
    rest = StoreRest(metrics)
    rest.raise_if_resting()  # healthy: nothing rests
    rest.failed(StoreUnavailableError("down"))
    assert not rest.is_ok
    with pytest.raises(StoreUnavailableError):
        rest.raise_if_resting()
    clock[0] += store_rest.STORE_RETRY_SECONDS
    rest.raise_if_resting()  # this call tries the store
    with pytest.raises(StoreUnavailableError):  # the calls behind it rest on
        rest.raise_if_resting()
    rest.failed(StoreUnavailableError("still down"))
    clock[0] += store_rest.STORE_RETRY_SECONDS - 0.1
    with pytest.raises(StoreUnavailableError):  # the failed retry started a new rest
        rest.raise_if_resting()
    rest.succeeded()
    rest.raise_if_resting()  # a success ends the rest at once
    assert rest.is_ok
    assert metrics.registry.get_sample_value("cachegate_semantic_store_unavailable_total") == 2
