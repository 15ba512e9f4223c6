"""Opt-in: the client checks of test_passthrough.py against a real vLLM server.

Runs only with ``CACHEGATE_TEST_VLLM_URL`` set (e.g. ``http://127.0.0.1:8100``), a vLLM
OpenAI server started with ``--enable-auto-tool-choice --tool-call-parser hermes``
(and ``--enable-prompt-tokens-details``), serving a tool-capable instruct model.
The official ``openai`` client asks vLLM directly and through the gateway; with
temperature 0 and a seed the answers must agree field for field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.app import Components
from semantic import Embedder
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway
from tests.gateway.vllm_recordings import TOOLS

VLLM_URL = os.environ.get("CACHEGATE_TEST_VLLM_URL", "")
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not VLLM_URL, reason="set CACHEGATE_TEST_VLLM_URL to a vLLM server"),
]
WEATHER = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]


@pytest.fixture(scope="module")
def gw(embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("vllm-live")
    settings = gateway_settings(data_dir, upstream_url=VLLM_URL.rstrip("/"))
    with running_gateway(settings, Components(embedder=embedder)) as gateway:
        yield gateway


def clients(gw: Gateway) -> tuple[Any, Any, str]:
    direct = openai.OpenAI(base_url=f"{VLLM_URL.rstrip('/')}/v1", api_key="x", max_retries=0)
    model = direct.models.list().data[0].id
    return direct, gw.openai(gw.tenant("vllm")[1]), model


def test_dialect_is_detected(gw: Gateway) -> None:
    upstream = gw.state.upstream
    dialects = {r.upstream.dialect.name for r in upstream.replicas}  # type: ignore[attr-defined]
    assert dialects == {"vllm"}


def test_tool_calling_round_trip(gw: Gateway) -> None:
    direct, via, model = clients(gw)
    ask = {"model": model, "messages": WEATHER, "tools": TOOLS, "temperature": 0, "seed": 1}
    a = direct.chat.completions.create(**ask)
    b = via.chat.completions.create(**ask)
    assert a.choices[0].finish_reason == b.choices[0].finish_reason == "tool_calls"
    calls = [
        [
            (c.function.name, json.loads(c.function.arguments))
            for c in r.choices[0].message.tool_calls
        ]
        for r in (a, b)
    ]
    assert calls[0] == calls[1] and calls[0]


def test_logprobs_round_trip(gw: Gateway) -> None:
    direct, via, model = clients(gw)
    ask = {"model": model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4}
    ask |= {"temperature": 0, "seed": 1, "logprobs": True, "top_logprobs": 2}
    a = direct.chat.completions.create(**ask)
    b = via.chat.completions.with_raw_response.create(**ask)
    assert b.headers["x-cachegate-semantic"] == "skipped:logprobs"
    tokens = [
        [(t.token, [x.token for x in t.top_logprobs]) for t in r.choices[0].logprobs.content]
        for r in (a, b.parse())
    ]
    assert tokens[0] == tokens[1] and tokens[0]
