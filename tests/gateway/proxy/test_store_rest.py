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


def test_the_rest_doubles_with_each_failed_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long outage of a database that hangs: each retry pays the lookup's deadline,
    so retries come less often (5, 10, 20, then every 30 s); a success resets it."""
    clock = [100.0]
    monkeypatch.setattr(store_rest.time, "monotonic", lambda: clock[0])
    rest = StoreRest(GatewayMetrics())
    rest.failed(StoreUnavailableError("down"))
    waits = []
    for _ in range(5):
        start = clock[0]
        while True:
            try:
                rest.raise_if_resting()
                break
            except StoreUnavailableError:
                clock[0] += 1.0
        waits.append(clock[0] - start)
        clock[0] += 5.0  # the retry hangs until its deadline, then fails
        rest.failed(StoreUnavailableError("no answer within 5 s"))
    # From each failure to the next retry; retries start 5, 10, 20, 30, 30 s apart (each
    # failed retry ended 5 s after it started).
    assert waits == [5.0, 5.0, 15.0, 25.0, 25.0]
    rest.succeeded()
    rest.failed(StoreUnavailableError("down again"))
    clock[0] += store_rest.STORE_RETRY_SECONDS
    rest.raise_if_resting()  # the first rest again
