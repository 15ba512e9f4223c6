"""Hypothesis-generated hostile input against the engine server (``cachegate engine``):
0 responses >= 500, 4xx in the OpenAI error shape, streams that end with [DONE]."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given, settings

from tests.hardening.checks import check_response, check_stream
from tests.hardening.strategies import bodies, headers
from tests.hardening.test_fuzz_gateway import FUZZ

pytestmark = pytest.mark.slow

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "t5 t6"}], "max_tokens": 2}
COMPLETION = {"model": "tiny", "prompt": "t5 t6 t7", "max_tokens": 2}


def _post(url: str, path: str, body: bytes, extra: dict[str, str]) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        with c.stream(
            "POST", path, content=body, headers={"content-type": "application/json"} | extra
        ) as r:
            text = r.read().decode("utf-8", "replace")
        check_response(r, body)
        if r.status_code == 200 and r.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            check_stream(text, body)


def test_engine_chat(engine_url: str) -> None:
    @settings(FUZZ, max_examples=50)
    @given(body=bodies(CHAT), extra=headers)
    def run(body: bytes, extra: dict[str, str]) -> None:
        _post(engine_url, "/v1/chat/completions", body, extra)

    run()


def test_engine_completions(engine_url: str) -> None:
    @settings(FUZZ, max_examples=50)
    @given(body=bodies(COMPLETION), extra=headers)
    def run(body: bytes, extra: dict[str, str]) -> None:
        _post(engine_url, "/v1/completions", body, extra)

    run()
    with httpx.Client(base_url=engine_url, timeout=30) as c:  # and it still serves
        r = c.post("/v1/completions", json=COMPLETION)
    assert r.status_code == 200, r.text
