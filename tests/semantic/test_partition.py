from __future__ import annotations

from typing import Any

import pytest

from semantic.errors import InvalidQuestionError, InvalidRequestError
from semantic.partition import (
    ANSWER_PARAMS,
    IGNORED_PARAMS,
    QUESTION_FIELDS,
    SemanticQuery,
    answer_params,
    partition_key,
    question_from_prompt,
    split_question,
)

SYSTEM = {"role": "system", "content": "You are a helpful bank assistant."}
QUESTION = {"role": "user", "content": "How do I reset my password?"}

BASE: dict[str, Any] = {
    "namespace": "tenant-a",
    "model": "smollm2-135m",
    "embedder_id": "all-MiniLM-L6-v2:384:abc",
    "params": {"temperature": 0.0, "max_tokens": 64},
    "context": [SYSTEM],
    "endpoint": "chat",
}


def key(**changes: Any) -> str:
    return partition_key(**{**BASE, **changes})


def test_split_question_takes_the_last_user_message() -> None:
    earlier = [SYSTEM, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    context, question = split_question([*earlier, QUESTION])
    assert context == earlier
    assert question == "How do I reset my password?"


def test_split_question_joins_text_parts() -> None:
    parts = [{"type": "text", "text": "How do I"}, {"type": "text", "text": "reset it?"}]
    assert split_question([{"role": "user", "content": parts}])[1] == "How do I\nreset it?"


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [SYSTEM],
        [QUESTION, {"role": "assistant", "content": "prefill"}],
        [QUESTION, {"role": "tool", "content": "42", "tool_call_id": "1"}],
        [{"content": "no role"}],
        "How do I reset my password?",
    ],
)
def test_split_question_refuses_non_standalone_questions(messages: Any) -> None:
    with pytest.raises(InvalidRequestError):
        split_question(messages)


def test_split_question_refuses_image_questions_and_empty_text() -> None:
    image = [{"type": "image_url", "image_url": {"url": "data:..."}}]
    with pytest.raises(InvalidQuestionError, match="non-text"):
        split_question([{"role": "user", "content": image}])
    with pytest.raises(InvalidQuestionError, match="empty"):
        split_question([{"role": "user", "content": "  "}])


def test_completion_prompt() -> None:
    assert question_from_prompt("What is 2FA?") == "What is 2FA?"
    assert question_from_prompt(["What is 2FA?"]) == "What is 2FA?"
    for bad in ([1, 2, 3], ["a", "b"], None):
        with pytest.raises(InvalidRequestError):
            question_from_prompt(bad)


def test_key_is_stable_hex() -> None:
    assert key() == key()
    assert len(key()) == 64 and int(key(), 16) >= 0


@pytest.mark.parametrize(
    "changes",
    [
        {"namespace": "tenant-b"},
        {"model": "other-model"},
        {"embedder_id": "all-MiniLM-L6-v2:384:def"},
        {"endpoint": "completion"},
        {"params": {"temperature": 0.7, "max_tokens": 64}},
        {"params": {"temperature": 0.0, "max_tokens": 65}},
        {"params": {"temperature": 0.0, "max_tokens": 64, "seed": 1}},
        {"params": {"temperature": 0.0, "max_tokens": 64, "stop": ["\n"]}},
        {"params": {"temperature": 0.0, "max_tokens": 64, "tools": [{"type": "function"}]}},
        {"params": {"temperature": 0.0, "max_tokens": 64, "response_format": {"type": "json"}}},
        {"params": {"temperature": 0.0, "max_tokens": 64, "n": 2}},
        {"params": {"temperature": 0.0, "max_tokens": 64, "vendor_extension": True}},
        {"context": []},
        {"context": [{"role": "system", "content": "You are a pirate."}]},
        {"context": [SYSTEM, {"role": "user", "content": "hi"}]},
        {"context": [{"role": "user", "content": SYSTEM["content"]}]},
    ],
)
def test_every_component_changes_the_key(changes: dict[str, Any]) -> None:
    assert key(**changes) != key()


@pytest.mark.parametrize(
    "params",
    [
        {"temperature": 0, "max_tokens": 64.0},  # JSON numbers by value
        {"max_tokens": 64, "temperature": 0.0, "user": "u-17", "stream": True},
        {"temperature": 0.0, "max_tokens": 64, "stream_options": {"include_usage": True}},
        {"temperature": 0.0, "max_tokens": 64, "seed": None},  # null == absent
        {"temperature": 0.0, "max_tokens": 64, "metadata": {"trace": "x"}},
    ],
)
def test_answer_neutral_differences_keep_the_key(params: dict[str, Any]) -> None:
    assert key(params=params) == key()


def test_param_lists_are_disjoint_and_structural_fields_excluded() -> None:
    assert not ANSWER_PARAMS & IGNORED_PARAMS
    assert {"temperature", "top_p", "max_tokens", "stop", "seed", "tools", "n"} <= ANSWER_PARAMS
    body = {"model": "m", "messages": [], "prompt": "p", "user": "u", "temperature": 1}
    assert answer_params(body) == {"temperature": 1}


def test_query_from_chat_and_completion_bodies() -> None:
    body = {
        "model": "smollm2-135m",
        "messages": [SYSTEM, QUESTION],
        "temperature": 0.0,
        "max_tokens": 64,
        "stream": True,
        "user": "someone",
    }
    query = SemanticQuery.from_chat(tenant="tenant-a", body=body)
    assert query.question == QUESTION["content"]
    assert query.context == (SYSTEM,)
    assert query.partition_key(BASE["embedder_id"]) == key()
    # The namespace, not the tenant id, is hashed; it defaults to the tenant id.
    shared = SemanticQuery.from_chat(tenant="tenant-z", body=body, namespace="tenant-a")
    assert shared.partition_key(BASE["embedder_id"]) == key()

    completion = SemanticQuery.from_completion(
        tenant="tenant-a", body={"model": "smollm2-135m", "prompt": "What is 2FA?"}
    )
    assert completion.endpoint == "completion" and completion.context == ()
    with pytest.raises(InvalidRequestError, match="model"):
        SemanticQuery.from_chat(tenant="t", body={"messages": [QUESTION]})
    with pytest.raises(InvalidRequestError, match="tenant"):
        SemanticQuery.from_chat(tenant="", body=body)


def test_the_question_messages_own_fields_split_the_partition() -> None:
    # An upstream reads a message's `name`: Alice's and Bob's identical words are two
    # questions. A plain message (or a null field) keeps the key it always had.
    def query(**fields: Any) -> SemanticQuery:
        body = {"model": "smollm2-135m", "messages": [SYSTEM, QUESTION | fields]}
        return SemanticQuery.from_chat(tenant="tenant-a", body=body)

    def k(q: SemanticQuery) -> str:
        return q.partition_key(BASE["embedder_id"])

    plain = query()
    assert k(query(name=None)) == k(plain) and plain.params == {}  # control: unchanged
    assert len({k(plain), k(query(name="alice")), k(query(name="bob"))}) == 3
    assert k(query(name="alice")) == k(query(name="alice"))
    assert query(name="alice").question == plain.question  # the words asked are the same


def test_a_body_field_named_like_the_keys_own_slot_is_not_keyed() -> None:
    """``question_message_fields`` is where the key holds the question message's extra
    fields: a body setting it at the top level would key alike with Alice's message
    (the same tenant's cache only), so such a request is not looked up or stored."""
    alice = {"model": "smollm2-135m", "messages": [SYSTEM, QUESTION | {"name": "alice"}]}
    forged = {
        "model": "smollm2-135m",
        "messages": [SYSTEM, QUESTION],
        QUESTION_FIELDS: {"name": "alice"},
    }
    assert SemanticQuery.from_chat(tenant="tenant-a", body=alice).params  # the control
    with pytest.raises(InvalidRequestError) as refused:
        SemanticQuery.from_chat(tenant="tenant-a", body=forged)
    assert refused.value.reason == "reserved_field"
