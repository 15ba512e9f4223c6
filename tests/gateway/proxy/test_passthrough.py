"""The gateway in front of a (scripted) vLLM server passes its answers through unchanged.

Tool calls, logprobs, reasoning content, the upstream's id and system_fingerprint
reach the client exactly as the upstream sent them, streamed and not, and the
official ``openai`` client reads them as it would from vLLM directly. Requests the
semantic layer could not replay skip the lookup and are not stored; a plain
answer with reasoning content is stored and replayed with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.app import Components
from semantic import Embedder
from tests.gateway import vllm_recordings as rec
from tests.gateway.conftest import Gateway, gateway_settings, running_gateway, sse_payloads
from tests.gateway.scripted_upstream import Upstream, answer_text, scripted_upstream

CHAT = "/v1/chat/completions"
WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]
CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with scripted_upstream("vllm") as upstream:
        yield upstream


@pytest.fixture(scope="module")
def gw(
    up: Upstream, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    data_dir: Path = tmp_path_factory.mktemp("passthrough")
    settings = gateway_settings(data_dir, upstream_url=up.url)
    with running_gateway(settings, Components(embedder=embedder)) as gateway:
        yield gateway


@pytest.fixture
def key(gw: Gateway) -> str:
    return gw.tenant("pass")[1]


def entries(gw: Gateway, key: str) -> int:
    ctx = gw.tenants.authenticate(key)
    return gw.cache.entries.count(tenant=ctx.tenant_id)


def test_models_are_the_upstreams_own_cards(gw: Gateway, key: str) -> None:
    with gw.http(key) as http:
        listed = http.get("/v1/models").json()
    assert listed["data"] == rec.MODEL_LIST["data"]  # owned_by, max_model_len, root: as sent


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_tool_calls_reach_the_client_exactly(gw: Gateway, key: str, stream: bool) -> None:
    body = {"model": rec.MODEL, "messages": WEATHER, "tools": rec.TOOLS, "stream": stream}
    with gw.http(key) as http:
        r = http.post(CHAT, json=body)
    assert r.status_code == 200, r.text
    assert r.headers["x-cachegate-semantic"] == "skipped:tools"
    if stream:
        chunks = sse_payloads(r.text)
        rid = chunks[0]["id"]
        # No usage chunk: the gateway asked for one for its metrics and took it out again.
        assert chunks == rec.chat_chunks(rid, rec.MODEL, "tools", "", include_usage=False)
    else:
        got = r.json()
        assert got == rec.chat_body(got["id"], rec.MODEL, "tools", "")
        assert r.headers["x-cachegate-backfill"] == "skipped:not_cacheable"
    assert entries(gw, key) == 0


def test_openai_client_tool_calling_round_trip(gw: Gateway, up: Upstream, key: str) -> None:
    # The SDK's TypedDict parameters and unions are not what this test is about.
    direct: Any = openai.OpenAI(base_url=f"{up.url}/v1", api_key="x", max_retries=0)
    via: Any = gw.openai(key)
    for client in (direct, via):
        got = client.chat.completions.create(model=rec.MODEL, messages=WEATHER, tools=rec.TOOLS)
        got_call = got.choices[0].message.tool_calls[0]
        assert got.choices[0].finish_reason == "tool_calls"
        assert (got_call.id, got_call.function.name) == (rec.TOOL_CALL_ID, "get_weather")
        assert json.loads(got_call.function.arguments) == {"city": "Paris", "unit": "celsius"}
        assert got.system_fingerprint == rec.FINGERPRINT and got.id.startswith("chatcmpl-")
        # Streamed: the SDK assembles the argument fragments the upstream sent.
        args, name = "", None
        finish = None
        for chunk in client.chat.completions.create(
            model=rec.MODEL, messages=WEATHER, tools=rec.TOOLS, stream=True
        ):
            for call in chunk.choices[0].delta.tool_calls or []:
                name = call.function.name or name
                args += call.function.arguments or ""
            finish = chunk.choices[0].finish_reason or finish
        assert (name, args, finish) == ("get_weather", "".join(rec.TOOL_ARGUMENTS), "tool_calls")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_logprobs_reach_the_client_exactly(gw: Gateway, key: str, stream: bool) -> None:
    body = {"model": rec.MODEL, "messages": CAPITAL, "logprobs": True, "top_logprobs": 2}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    with gw.http(key) as http:
        r = http.post(CHAT, json=body)
    assert r.status_code == 200, r.text
    assert r.headers["x-cachegate-semantic"] == "skipped:logprobs"
    if stream:
        chunks = sse_payloads(r.text)
        # The client asked for usage itself: the upstream's usage chunk is passed through.
        expected = rec.chat_chunks(chunks[0]["id"], rec.MODEL, "logprobs", "", include_usage=True)
        assert chunks == expected
    else:
        assert r.json() == rec.chat_body(r.json()["id"], rec.MODEL, "logprobs", "")
    assert entries(gw, key) == 0
    got = gw.openai(key).chat.completions.create(
        model=rec.MODEL, messages=CAPITAL, logprobs=True, top_logprobs=2
    )
    top = got.choices[0].logprobs.content[0].top_logprobs
    assert [(t.token, t.logprob) for t in top] == [("Paris", -0.0112), (" Paris", -4.61)]


# Any part that is not text, in any turn, makes the request unreplayable (deny by
# default): the semantic key is the text alone.
MEDIA_PARTS: list[tuple[dict[str, Any], str]] = [
    ({"type": "video_url", "video_url": {"url": "http://media.example/cam.mp4"}}, "video"),
    ({"type": "audio_url", "audio_url": {"url": "http://media.example/cam.wav"}}, "audio"),
    ({"type": "file", "file": {"filename": "r.pdf", "file_data": "data:application/pdf;base64,"}},
     "files"),
    ({"type": "input_depth_map", "input_depth_map": {"url": "http://media.example/d"}}, "media"),
]  # fmt: skip


def _earlier_turn(part: dict[str, Any]) -> dict[str, Any]:
    first = {"role": "user", "content": [{"type": "text", "text": "Look at this."}, part]}
    turns = [first, {"role": "assistant", "content": "I see it."}]
    return {"messages": [*turns, {"role": "user", "content": "What colour is the car in it?"}]}


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"n": 2}, "n"),
        ({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]},
         "images"),
        ({"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        *((_earlier_turn(part), reason) for part, reason in MEDIA_PARTS),
    ],
    ids=["n", "images", "audio", *(f"earlier-{part['type']}" for part, _ in MEDIA_PARTS)],
)  # fmt: skip
def test_unreplayable_requests_skip_the_lookup_and_are_forwarded(
    gw: Gateway, up: Upstream, key: str, extra: dict[str, Any], reason: str
) -> None:
    body = {"model": rec.MODEL, "messages": CAPITAL} | extra
    with gw.http(key) as http:
        r = http.post(CHAT, json=body)
    assert r.status_code == 200, r.text
    assert r.headers["x-cachegate-semantic"] == f"skipped:{reason}"
    assert r.headers["x-cachegate-backfill"] == "skipped:not_cacheable"
    forwarded = up.chats()[-1]
    assert {k: forwarded[k] for k in extra} == extra  # the client's fields, untouched
    assert entries(gw, key) == 0


def test_plain_answer_with_reasoning_is_stored_and_replayed_with_it(gw: Gateway, key: str) -> None:
    body = {"model": rec.REASONER, "messages": CAPITAL}
    with gw.http(key) as http:
        first = http.post(CHAT, json=body)
        assert first.headers["x-cachegate-backfill"] == "stored"
        assert first.json() == rec.chat_body(first.json()["id"], rec.REASONER, "reasoning", "")
        hit = http.post(CHAT, json=body)
        streamed = http.post(CHAT, json=body | {"stream": True})
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    message = hit.json()["choices"][0]["message"]
    assert message["content"] == "".join(rec.ANSWER)
    assert message["reasoning_content"] == "".join(rec.REASONING)
    deltas = [c["choices"][0]["delta"] for c in sse_payloads(streamed.text) if c["choices"]]
    assert streamed.headers["x-cachegate-cache"] == "semantic-hit"
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "".join(rec.REASONING)
    assert "".join(d.get("content", "") for d in deltas) == "".join(rec.ANSWER)


def test_streamed_plain_answer_is_passed_through_and_stored(gw: Gateway, key: str) -> None:
    body = {"model": rec.MODEL, "messages": CAPITAL, "stream": True}
    with gw.http(key) as http:
        r = http.post(CHAT, json=body)
        chunks = sse_payloads(r.text)
        text = answer_text(body)
        assert chunks == rec.chat_chunks(chunks[0]["id"], rec.MODEL, "plain", text, False)
        hit = http.post(CHAT, json=body | {"stream": False})
    assert hit.headers["x-cachegate-cache"] == "semantic-hit"
    assert hit.json()["choices"][0]["message"]["content"] == text


def test_request_id_and_traceparent_are_forwarded_and_echoed(
    gw: Gateway, up: Upstream, key: str
) -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    headers = {"x-request-id": "client-req-42", "traceparent": parent, "tracestate": "vendor=1"}
    body = {"model": rec.MODEL, "messages": WEATHER, "tools": rec.TOOLS}
    with gw.http(key) as http:
        for stream in (False, True):
            r = http.post(CHAT, json=body | {"stream": stream}, headers=headers)
            assert r.status_code == 200, r.text
            seen = up.headers[-1]
            for name, value in headers.items():
                assert r.headers[name] == value
                # the id is made unique on its way (gateway/proxy/request_keys.py)
                assert seen[name] == value or seen[name].startswith(f"{value}.")
            assert seen["x-request-id"] != "client-req-42"
        # Malformed ids are not echoed: a fresh id replaces the request id, the trace goes.
        bad = {"x-request-id": "has spaces\tand tabs", "traceparent": "not-a-trace"}
        r = http.post(CHAT, json=body, headers=bad)
    assert r.status_code == 200
    assert r.headers["x-request-id"].startswith("chatcmpl-") and "traceparent" not in r.headers
    assert up.headers[-1]["x-request-id"].startswith(r.headers["x-request-id"] + ".")
    assert "traceparent" not in up.headers[-1]


def test_vllm_gets_the_tenant_salt_and_never_the_cache_object(
    gw: Gateway, up: Upstream, key: str
) -> None:
    body = {"model": rec.MODEL, "messages": WEATHER, "tools": rec.TOOLS,
            "cache": {"no-store": True}}  # fmt: skip
    with gw.http(key) as http:
        assert http.post(CHAT, json=body).status_code == 200
        other = gw.tenant("pass-other")[1]
    with httpx.Client(base_url=gw.url, headers={"Authorization": f"Bearer {other}"}) as http:
        assert http.post(CHAT, json=body).status_code == 200
    mine, theirs = up.chats()[-2:]
    assert "cache" not in mine and "cache" not in theirs
    assert len(mine["cache_salt"]) == 64 and mine["cache_salt"] != theirs["cache_salt"]
