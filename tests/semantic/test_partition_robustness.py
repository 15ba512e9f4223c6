"""Bodies the cache cannot key raise the library's own errors, never a bare TypeError or
RecursionError: a text part without str text (semantic/partition.py) and a component
nested past the canonical form's depth bound (semantic/canonical.py). The gateway
turns these into ``skipped:uncacheable:<reason>`` and forwards the request."""

from __future__ import annotations

from typing import Any

import pytest

from semantic.canonical import MAX_DEPTH, canonical_bytes
from semantic.errors import InvalidQuestionError, InvalidRequestError
from semantic.partition import SemanticQuery, message_text, partition_key

SECRET = "zebra"  # client text that must not appear in a refusal's message


@pytest.mark.parametrize("text", [None, 5, 1.5, True, ["a"], {"a": SECRET}])
def test_a_text_part_whose_text_is_not_a_str_is_refused(text: object) -> None:
    bad = {"type": "text", "text": text}
    for content in ([bad], [{"type": "text", "text": "hello"}, bad]):
        with pytest.raises(InvalidQuestionError) as caught:
            message_text(content)
        assert caught.value.reason == "not_text"
        assert SECRET not in str(caught.value)


def test_a_chat_body_with_a_null_text_part_cannot_be_keyed() -> None:
    content = [{"type": "text", "text": None}]
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    with pytest.raises(InvalidQuestionError):
        SemanticQuery.from_chat(tenant="t", body=body)


def test_text_parts_still_join() -> None:
    parts = [{"type": "text", "text": "hello"}, {"type": "text"}, {"type": "text", "text": "you"}]
    assert message_text(parts) == "hello\n\nyou"  # a missing text is empty, as before


@pytest.mark.parametrize(
    ("part", "shown"),
    [
        ({"type": "image_url", "image_url": {"url": "x"}}, "(image_url)"),
        ({"type": SECRET}, "(?)"),  # a client's own type is not quoted
        ({"type": ["not", "hashable"]}, "(?)"),
        ({"type": {"a": 1}}, "(?)"),
        ("bare string", "(str)"),
    ],
)
def test_a_non_text_part_is_refused_without_quoting_it(part: Any, shown: str) -> None:
    with pytest.raises(InvalidQuestionError) as caught:
        message_text([part])
    assert shown in str(caught.value)
    assert caught.value.reason == "not_text"


def deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_nesting_past_the_bound_is_an_invalid_request_not_a_recursion_error() -> None:
    assert canonical_bytes(deep(MAX_DEPTH))  # MAX_DEPTH containers: encoded
    for depth in (MAX_DEPTH + 1, 960, 5000):
        with pytest.raises(InvalidRequestError, match="nests deeper"):
            canonical_bytes(deep(depth))
    with pytest.raises(InvalidRequestError):
        canonical_bytes({"a": {"b": deep(MAX_DEPTH)}})


def test_a_deep_parameter_makes_the_partition_key_refuse() -> None:
    # ~960 levels passed json.loads and recursed until Python's own limit in _encode.
    with pytest.raises(InvalidRequestError):
        partition_key(namespace="t", model="m", embedder_id="e", params={"foo": deep(960)})
    key = partition_key(namespace="t", model="m", embedder_id="e", params={"foo": deep(64)})
    assert len(key) == 64
