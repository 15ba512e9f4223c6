"""Bad input over a real socket: every malformed request gets a 4xx in the OpenAI
error shape (never a 500), unknown fields are ignored, and the gateway keeps
serving normally afterwards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import Components
from prefix.model.loader import LoadedModel
from semantic import Embedder
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
COMP = "/v1/completions"
MAX_BODY = 20_000
M = "@model"  # replaced by the served model's id
MSGS = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def gw(
    smol_loaded: LoadedModel, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("gateway-bad-input")
    settings = gateway_settings(data_dir, max_body_bytes=MAX_BODY)
    parts = Components(engine=smol_engine(smol_loaded, num_blocks=64), embedder=embedder)
    with running_gateway(settings, parts) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def key(gw: Gateway) -> str:
    return gw.tenant("bad")[1]


# (id, path, body: a dict sent as JSON or raw bytes, status, expected param)
BAD_INPUT: list[tuple[str, str, Any, int, str | None]] = [
    ("malformed-json", CHAT, b'{"model": "x", "messages": [', 400, None),
    ("not-an-object", CHAT, b"[1, 2]", 400, None),
    ("empty-body", CHAT, b"", 400, None),
    ("blank-body", CHAT, b"  \n ", 400, None),
    ("nan-literal", CHAT, b'{"model": "x", "messages": [], "temperature": NaN}', 400, None),
    ("too-deep", CHAT, b"[" * 5000 + b"]" * 5000, 400, None),
    ("invalid-utf8", CHAT, b'{"model": "x", "messages": [{"role": "user", "content": "\xff\xfe"}]}',
     400, None),
    ("latin-1-body", CHAT, '{"model": "x", "messages": [{"role": "user", "content": "café"}]}'
     .encode("latin-1"), 400, None),
    ("missing-model", CHAT, {"messages": MSGS}, 400, "model"),
    ("model-int", CHAT, {"model": 5, "messages": MSGS}, 400, "model"),
    ("missing-messages", CHAT, {"model": M}, 400, "messages"),
    ("messages-int", CHAT, {"model": M, "messages": 5}, 400, "messages"),
    ("messages-str-items", CHAT, {"model": M, "messages": ["hi"]}, 400, "messages"),
    ("empty-messages", CHAT, {"model": M, "messages": []}, 400, "messages"),
    ("unknown-role", CHAT, {"model": M, "messages": [{"role": "wizard", "content": "hi"}]},
     400, "messages"),
    ("missing-role", CHAT, {"model": M, "messages": [{"content": "hi"}]}, 400, "messages"),
    ("content-int", CHAT, {"model": M, "messages": [{"role": "user", "content": 5}]},
     400, "messages"),
    ("image-part", CHAT, {"model": M, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x"}}]}]}, 400, "messages"),
    ("lone-surrogate", CHAT, {"model": M, "messages": [{"role": "user", "content": "hi \ud800"}]},
     400, "messages"),
    ("max-tokens-str", CHAT, {"model": M, "messages": MSGS, "max_tokens": "5"}, 400, "max_tokens"),
    ("max-tokens-float", CHAT, {"model": M, "messages": MSGS, "max_tokens": 2.5},
     400, "max_tokens"),
    ("negative-max-tokens", CHAT, {"model": M, "messages": MSGS, "max_tokens": -1},
     400, "max_tokens"),
    ("huge-max-tokens", CHAT, {"model": M, "messages": MSGS, "max_tokens": 10**30},
     400, "messages"),
    ("temperature-str", CHAT, {"model": M, "messages": MSGS, "temperature": "hot"},
     400, "temperature"),
    ("temperature-5", CHAT, {"model": M, "messages": MSGS, "temperature": 5}, 400, "temperature"),
    ("top-p-0", CHAT, {"model": M, "messages": MSGS, "top_p": 0}, 400, "top_p"),
    ("n-5", CHAT, {"model": M, "messages": MSGS, "n": 5}, 400, "n"),
    ("n-0", CHAT, {"model": M, "messages": MSGS, "n": 0}, 400, "n"),
    ("stream-str", CHAT, {"model": M, "messages": MSGS, "stream": "yes"}, 400, "stream"),
    ("stream-options-str", CHAT, {"model": M, "messages": MSGS, "stream": True,
                                  "stream_options": "x"}, 400, "stream_options"),
    ("stream-with-bad-messages", CHAT, {"model": M, "messages": 5, "stream": True},
     400, "messages"),
    ("stop-int", CHAT, {"model": M, "messages": MSGS, "stop": 5}, 400, "stop"),
    ("user-int", CHAT, {"model": M, "messages": MSGS, "user": 5}, 400, "user"),
    ("unknown-model", CHAT, {"model": "gpt-9", "messages": MSGS}, 404, "model"),
    ("oversize-body", CHAT, {"model": M, "messages": [{"role": "user", "content": "a " * 20_000}]},
     413, None),
    ("oversize-garbage", CHAT, b"\xff" * (MAX_BODY + 1), 413, None),
    ("prompt-missing", COMP, {"model": M}, 400, "prompt"),
    ("prompt-empty", COMP, {"model": M, "prompt": ""}, 400, "prompt"),
    ("prompt-two", COMP, {"model": M, "prompt": ["a", "b"]}, 400, "prompt"),
    ("prompt-token-out-of-range", COMP, {"model": M, "prompt": [10**9]}, 400, "prompt"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "body", "status", "param"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_INPUT],
)
def test_bad_input_is_a_4xx_in_openai_shape(
    gw: Gateway, key: str, path: str, body: Any, status: int, param: str | None
) -> None:
    with gw.http(key, 30) as http:
        if isinstance(body, bytes):
            r = http.post(path, content=body, headers={"content-type": "application/json"})
        else:
            payload = json.dumps({k: gw.model if v == M else v for k, v in body.items()})
            r = http.post(path, content=payload, headers={"content-type": "application/json"})
    err = assert_openai_error(r, status, "invalid_request_error")
    assert err["param"] == param, err
    if status == 404:
        assert err["code"] == "model_not_found" and gw.model in err["message"]
    if status == 413:
        assert err["code"] == "request_too_large" and str(MAX_BODY) in err["message"]


def test_error_messages_say_what_is_wrong(gw: Gateway, key: str) -> None:
    with gw.http(key, 30) as http:
        post = http.post
        bad_json = post(CHAT, content=b"{nope", headers={"content-type": "application/json"})
        assert "not valid JSON" in assert_openai_error(bad_json, 400)["message"]
        utf8 = post(
            CHAT, content=b'{"model": "\xc3"}', headers={"content-type": "application/json"}
        )
        assert "utf-8" in assert_openai_error(utf8, 400)["message"].lower()
        n5 = post(CHAT, json={"model": gw.model, "messages": MSGS, "n": 5})
        assert assert_openai_error(n5, 400)["message"] == "n > 1 is not supported"
        role = post(CHAT, json={"model": gw.model, "messages": [{"role": "x", "content": "y"}]})
        assert "role" in assert_openai_error(role, 400)["message"]


def test_routing_and_auth_errors_keep_the_shape(gw: Gateway, key: str) -> None:
    with httpx.Client(base_url=gw.url, timeout=30) as anon:
        # Authentication comes first: a bad body without a key is a 401, not a 400.
        assert_openai_error(anon.post(CHAT, content=b"{nope"), 401)
    with gw.http(key, 30) as http:
        assert_openai_error(http.get("/v1/nope"), 404)
        assert_openai_error(http.get(CHAT), 405)
        assert_openai_error(http.put(CHAT, json={}), 405)


def test_unknown_fields_are_ignored_and_service_continues(gw: Gateway, key: str) -> None:
    # Runs after the bad inputs above (module order): the gateway still serves normally.
    body = chat_body(gw.model, "Say hello.", max_tokens=8) | {
        "foo": 1,
        "logit_bias": {},
        "metadata": {"anything": ["goes"]},
        "frequency_penalty": 0,  # a penalty of 0 changes nothing; a real one is a 400
    }
    body["messages"][-1]["name"] = "alice"
    with gw.http(key, 60) as http:
        r = http.post(CHAT, json=body)
        assert r.status_code == 200, r.text
        assert r.json()["object"] == "chat.completion" and content(r).strip()
        # Odd but valid: multi-part text content and an odd Cache-Control header.
        parts = chat_body(gw.model, "Say hi.", max_tokens=4)
        parts["messages"][-1]["content"] = [{"type": "text", "text": "Say hi."}]
        odd = http.post(CHAT, json=parts, headers={"Cache-Control": 'no-cache="x", max-age=5'})
        assert odd.status_code == 200, odd.text
    completion = gw.openai(key).chat.completions.create(
        model=gw.model,
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=4,
        temperature=0,
        extra_body={"foo": {"bar": [1, 2]}},
    )
    assert completion.choices[0].message.content
    assert httpx.get(f"{gw.url}/health", timeout=10).status_code == 200
    assert httpx.get(f"{gw.url}/ready", timeout=10).json()["ready"] is True
