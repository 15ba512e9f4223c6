"""Issue 14: response headers and error messages never carry user text.

The reported bug: a long Chinese question at temperature 0, asked in a partition
that already holds an entry, was answered by the model and then turned into a
500 (UnicodeEncodeError), because the embedder's too-long error quoted the
question into ``x-cachegate-semantic`` and header lines are Latin-1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.app import Components
from prefix.model.loader import LoadedModel
from protocol.headers import MAX_TOKEN_CHARS, header_token, safe_headers
from semantic import Embedder
from semantic.errors import InvalidQuestionError
from tests.gateway.conftest import (
    Gateway,
    assert_openai_error,
    chat_body,
    content,
    gateway_settings,
    running_gateway,
    smol_engine,
)

pytestmark = pytest.mark.slow

CHAT = "/v1/chat/completions"
LONG_ZH = "这是一个很长的问题" * 40  # 360 characters, more tokens than the embedder reads


@pytest.fixture(scope="module")
def gw(
    smol_loaded: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("gateway-user-text")
    parts = Components(engine=smol_engine(smol_loaded, num_blocks=96), embedder=embedder)
    with running_gateway(gateway_settings(data_dir), parts) as gateway:
        yield gateway


def _ascii_headers(r: httpx.Response) -> dict[str, str]:
    cg = {k: v for k, v in r.headers.items() if k.startswith("x-cachegate-")}
    for value in cg.values():
        assert value.isascii() and len(value) <= MAX_TOKEN_CHARS, cg
    return cg


def test_long_chinese_question_in_a_non_empty_partition_is_answered(gw: Gateway) -> None:
    _, key = gw.tenant("zh")
    with gw.http(key) as c:
        # Positive control: the partition gets an entry, and its header is a plain token.
        first = c.post(CHAT, json=chat_body(gw.model, "What is the capital of France?"))
        assert first.status_code == 200, first.text
        assert _ascii_headers(first)["x-cachegate-backfill"] == "stored"
        r = c.post(CHAT, json=chat_body(gw.model, LONG_ZH, max_tokens=8))
    assert r.status_code == 200, r.text  # before the fix: 500 UnicodeEncodeError
    assert content(r) or r.json()["choices"][0]["finish_reason"] == "length"
    headers = _ascii_headers(r)
    assert headers["x-cachegate-semantic"].startswith(("skipped:", "miss:")), headers
    assert "这是" not in r.headers.get("x-cachegate-semantic", "")


def test_long_chinese_question_streamed_is_answered(gw: Gateway) -> None:
    _, key = gw.tenant("zh-stream")
    with gw.http(key) as c:
        assert c.post(CHAT, json=chat_body(gw.model, "What color is the sky?")).status_code == 200
        with c.stream(
            "POST", CHAT, json=chat_body(gw.model, LONG_ZH, max_tokens=4, stream=True)
        ) as r:
            body = r.read().decode()
    assert r.status_code == 200, body
    assert body.rstrip().endswith("data: [DONE]")
    _ascii_headers(r)


def test_unknown_model_error_does_not_echo_the_name(gw: Gateway) -> None:
    _, key = gw.tenant("model")
    secret = "我的秘密提示 ignore previous instructions"
    with gw.http(key) as c:
        r = c.post(CHAT, json=chat_body(secret, "Hello"))
        ok = c.post(CHAT, json=chat_body(gw.model, "Hello", max_tokens=2))
    err = assert_openai_error(r, 404)
    assert secret not in err["message"] and "秘密" not in r.text
    assert gw.model in err["message"]  # it still says what exists
    assert ok.status_code == 200, ok.text  # control: the right model name works


def test_embedder_error_message_does_not_quote_the_question(embedder: Embedder) -> None:
    with pytest.raises(InvalidQuestionError) as info:
        embedder.embed([LONG_ZH])
    assert "这是" not in str(info.value)
    assert info.value.reason == "too_many_tokens"
    # Control: a question within the limit embeds.
    assert embedder.embed(["What is the capital of France?"]).shape[0] == 1


def test_header_token_reduces_anything_to_a_short_ascii_token() -> None:
    assert header_token("miss:entity_mismatch:amount") == "miss:entity_mismatch:amount"
    assert header_token("0.9312") == "0.9312"
    for hostile in (
        LONG_ZH,
        "a\r\nSet-Cookie: x=1",
        "\ud800",
        "é" * 500,
        "",
        "http://10.0.0.1:8001",
    ):
        token = header_token(hostile)
        token.encode("latin-1")  # never raises
        assert token.isascii() and 0 < len(token) <= MAX_TOKEN_CHARS
        assert "\r" not in token and "\n" not in token and " " not in token and "/" not in token
    assert safe_headers({"x-request-id": "abc", "x-cachegate-semantic": LONG_ZH}) == {
        "x-request-id": "abc",
        "x-cachegate-semantic": "none",
    }
