"""Request keys made unique before an upstream (gateway/proxy/request_keys.py)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.proxy.request_keys import upstream_request_id, with_unique_keys


def test_each_key_the_client_set_gets_the_suffix_and_the_body_is_not_changed() -> None:
    body: dict[str, Any] = {"model": "m", "request_id": "abc", "rid": ["r1", "r2"]}
    out = with_unique_keys(body, "f00d")
    assert out == {"model": "m", "request_id": "abc.f00d", "rid": ["r1.f00d.0", "r2.f00d.1"]}
    assert body == {"model": "m", "request_id": "abc", "rid": ["r1", "r2"]}  # a copy


@pytest.mark.parametrize(
    "body",
    [{"model": "m"}, {"rid": 7}, {"rid": []}, {"request_id": None}, {"rid": ["a", 1]}],
)
def test_a_body_without_string_keys_goes_as_it_came(body: dict[str, Any]) -> None:
    assert with_unique_keys(body, "f00d") is body  # the upstream judges other types


def test_the_clients_id_stays_in_front() -> None:
    assert upstream_request_id("client-1", "f00d") == "client-1.f00d"
