"""The built-in engine behind the gateway: no self-inflicted truncation, and a 400 naming
every parameter it does not implement (never silently ignored). Real SmolLM2."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway.conftest import Gateway, assert_openai_error
from tests.gateway.e2e_support import ask

CHAT = "/v1/chat/completions"
QUESTION = "How do I reset an online banking password?"


def test_without_max_tokens_the_answer_finishes_and_is_stored(e2e_gw: Gateway) -> None:
    # With the old 256-token server default this question was cut ("length") and never
    # cached; now the limit is the context window, as in vLLM and the OpenAI API.
    key = e2e_gw.tenant("no-limit")[1]
    body = {"model": e2e_gw.model, "messages": ask(QUESTION), "temperature": 0}
    with e2e_gw.http(key, timeout=600) as http:
        r = http.post(CHAT, json=body)
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["finish_reason"] == "stop"
        assert r.headers["x-cachegate-backfill"] == "stored"
        again = http.post(CHAT, json=body)
    assert again.headers["x-cachegate-cache"] == "semantic-hit"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, "tools"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"frequency_penalty": 1}, "frequency_penalty"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"n": 2}, "n"),
    ],
)
def test_unimplemented_parameters_are_a_400_naming_them(
    e2e_gw: Gateway, extra: dict[str, Any], param: str
) -> None:
    key = e2e_gw.tenant("unimplemented")[1]
    body = {"model": e2e_gw.model, "messages": ask("Say hi."), "max_tokens": 4} | extra
    with e2e_gw.http(key, timeout=120) as http:
        err = assert_openai_error(http.post(CHAT, json=body), 400, "invalid_request_error")
        # Positive control: the same request without the parameter is answered.
        ok = http.post(CHAT, json={k: v for k, v in body.items() if k not in extra})
    assert err["param"] == param and param.split("_")[0] in err["message"]
    assert ok.status_code == 200, ok.text
