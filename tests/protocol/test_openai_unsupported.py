"""What the built-in engine refuses (``unsupported_field``): every field it cannot honour,
named, never silently ignored; the defaults and their spellings (``false``, ``null``,
``""``, ``best_of: 1``) pass. HTTP upstreams forward these fields unchanged
(``tests/gateway/proxy/relay/test_upstream_requests.py``). No socket, no model."""

from __future__ import annotations

from typing import Any

import pytest

from prefix.serve.openai_adapter import refuse_unsupported
from protocol.errors import ApiError
from protocol.openai import CompletionRequest, parse_request

PROMPT = {"model": "m", "prompt": "The capital of France is", "max_tokens": 2}
SECRET = "zebra-suffix-text"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logprobs": 0}, "logprobs"),  # 0 == False: it read as unset
        ({"logprobs": 2}, "logprobs"),
        ({"echo": True}, "echo"),
        ({"suffix": SECRET}, "suffix"),
        ({"best_of": 3}, "best_of"),
        # Several prompts: one answer a prompt, which the engine does not batch.
        ({"prompt": ["The capital of France is", SECRET]}, "prompt"),
        ({"prompt": [[791, 6864], [791]]}, "prompt"),
    ],
)
def test_completion_fields_the_engine_cannot_honour_are_refused_by_name(
    extra: dict[str, Any], param: str
) -> None:
    req = parse_request(PROMPT | extra, chat=False)
    assert req.unsupported_field() == param
    with pytest.raises(ApiError) as caught:
        refuse_unsupported(req)
    err = caught.value
    assert (err.status, err.param, err.code) == (400, param, "unsupported_parameter")
    assert SECRET not in err.message and "3" not in err.message  # named, not quoted


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"logprobs": None},
        {"echo": False},
        {"suffix": None},
        {"suffix": ""},
        {"best_of": 1},
        {"prompt": ["one prompt in a list"]},
        {"prompt": [[791, 6864]]},
        {"prompt": [791, 6864]},
    ],
)
def test_defaults_are_not_refused(extra: dict[str, Any]) -> None:
    req = parse_request(PROMPT | extra, chat=False)
    assert req.unsupported_field() is None
    assert isinstance(req, CompletionRequest)
    prompt = (PROMPT | extra)["prompt"]
    one = prompt[0] if isinstance(prompt, list) and isinstance(prompt[0], str | list) else prompt
    assert req.engine_prompt() == one


def test_chat_logprobs_false_is_the_default() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert parse_request(chat | {"logprobs": False}, chat=True).unsupported_field() is None
    assert parse_request(chat | {"logprobs": True}, chat=True).unsupported_field() == "logprobs"


@pytest.mark.parametrize("chat", [True, False])
def test_stream_options_without_stream_is_a_400_as_in_vllm(chat: bool) -> None:
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]} if chat else PROMPT
    for off in ({}, {"stream": False}, {"stream": None}):
        body = base | off | {"stream_options": {"include_usage": True}}
        with pytest.raises(ApiError) as caught:
            refuse_unsupported(parse_request(body, chat=chat))
        assert (caught.value.status, caught.value.param) == (400, "stream_options")
    # Controls: with stream, null options and vLLM's falsy `{}` pass.
    controls: list[dict[str, Any]] = [
        {"stream": True, "stream_options": {"include_usage": True}},
        {"stream_options": None},
        {"stream_options": {}},
    ]
    for ok in controls:
        refuse_unsupported(parse_request(base | ok, chat=chat))


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"min_p": 0.05}, "min_p"),
        ({"repetition_penalty": 1.1}, "repetition_penalty"),
        ({"repetition_penalty": True}, "repetition_penalty"),
        ({"min_tokens": 5}, "min_tokens"),
        ({"use_beam_search": True}, "use_beam_search"),
    ],
)
def test_vllm_sampling_extensions_the_engine_lacks_are_refused(
    extra: dict[str, Any], param: str
) -> None:
    """They were dropped unread: a vLLM client got another distribution and no sign of
    it (a review, session 45)."""
    for chat in (True, False):
        base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]} if chat else PROMPT
        req = parse_request(base | extra, chat=chat)
        with pytest.raises(ApiError) as caught:
            refuse_unsupported(req)
        assert (caught.value.status, caught.value.param) == (400, param)
        assert caught.value.code == "unsupported_parameter"


@pytest.mark.parametrize(
    "extra",
    [
        {"min_p": 0.0},
        {"min_p": 0},
        {"repetition_penalty": 1.0},
        {"min_tokens": 0},
        {"use_beam_search": False},
        {"top_k": 40},
        {"stop_token_ids": [2]},
    ],
)
def test_their_neutral_values_and_the_implemented_ones_pass(extra: dict[str, Any]) -> None:
    refuse_unsupported(parse_request(PROMPT | extra, chat=False))
