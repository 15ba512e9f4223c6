"""Counts as vLLM reads them, and stop sequences as many as an upstream takes.

A whole-number float (``max_tokens: 100.0``) is the integer, as pydantic's lax mode in
vLLM and SGLang reads it; fractions, strings, booleans and floats past 2**53 stay
refused. A request may carry up to 64 stop sequences for an HTTP upstream; the built-in
engine's own limit (4, each at most 256 characters) is a 400 naming ``stop`` where its
sampling parameters are built.
"""

from __future__ import annotations

from typing import Any

import pytest

from protocol.errors import ApiError, InvalidSamplingParamsError
from protocol.openai import MAX_REQUEST_STOPS, ChatCompletionRequest, parse_request
from protocol.sampling import MAX_STOP_SEQUENCES, SamplingParams

MSGS = [{"role": "user", "content": "Hi"}]


def chat(**extra: Any) -> ChatCompletionRequest:
    req = parse_request({"model": "m", "messages": MSGS} | extra, chat=True)
    assert isinstance(req, ChatCompletionRequest)
    return req


@pytest.mark.parametrize(
    "field", ["max_tokens", "max_completion_tokens", "seed", "n", "top_logprobs"]
)
def test_a_whole_number_float_is_the_integer(field: str) -> None:
    req = chat(**{field: 3.0})
    value = getattr(req, field)
    assert value == 3 and type(value) is int


@pytest.mark.parametrize("value", [3.5, "3", True, float(2**60), float("nan"), float("inf")])
def test_other_counts_are_still_refused(value: Any) -> None:
    with pytest.raises(ApiError) as refused:
        chat(max_tokens=value)
    assert refused.value.status == 400 and refused.value.param == "max_tokens"


def test_an_http_upstream_may_get_more_stops_than_the_engine_takes() -> None:
    stops = [f"s{i}" for i in range(MAX_STOP_SEQUENCES + 1)]
    assert chat(stop=stops).stop_tuple() == tuple(stops)  # parsed: forwarded as sent
    with pytest.raises(InvalidSamplingParamsError, match=r"^stop "):  # the engine: a 400
        SamplingParams(stop=tuple(stops))
    with pytest.raises(ApiError) as refused:  # the bound on any request
        chat(stop=[f"s{i}" for i in range(MAX_REQUEST_STOPS + 1)])
    assert refused.value.param == "stop"
