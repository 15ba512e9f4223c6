from __future__ import annotations

import math

import pytest

from semantic.canonical import canonical_bytes
from semantic.errors import InvalidRequestError


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (["ab", "c"], ["a", "bc"]),
        (None, ""),
        (True, 1),
        (False, 0),
        ("1", 1),
        ([1, 2], [[1, 2]]),
        ({"a": 1}, [["a", 1]]),
        (0.5, "0.5"),
        (b"x", "x"),
    ],
)
def test_distinct_values_serialize_differently(left: object, right: object) -> None:
    assert canonical_bytes(left) != canonical_bytes(right)


def test_equal_values_serialize_the_same() -> None:
    assert canonical_bytes({"b": 1, "a": [1, 2]}) == canonical_bytes({"a": [1, 2], "b": 1})
    assert canonical_bytes(1.0) == canonical_bytes(1)  # JSON numbers compare by value
    assert canonical_bytes((1, "x")) == canonical_bytes([1, "x"])
    assert canonical_bytes(0.7) == canonical_bytes(0.7)


@pytest.mark.parametrize("value", [math.nan, math.inf, {1: "a"}, object(), "\udc80"])
def test_rejects_values_without_a_canonical_form(value: object) -> None:
    with pytest.raises(InvalidRequestError):
        canonical_bytes(value)
