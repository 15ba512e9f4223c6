"""The engine's OpenAI-compatible server over real sockets (uvicorn in a thread), on a
tiny random Llama (word-level tokenizer, plus a toy chat template): identity,
bad input, SSE framing and disconnects. The slow tests over the real SmolLM2
are in test_server_openai.py.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from prefix.serve.server import KEY_HEADER, NAMESPACE_HEADER, create_engine_app, resolve_namespace
from prefix.serve.trusted_namespace import resolve_tenant
from protocol.headers import KV_REUSE_HEADER, QUOTA_HEADER, TENANT_HEADER
from tests.live_server import serving
from tests.prefix.server_support import (
    BAD_INPUT,
    CHAT,
    COMP,
    KEY,
    MSGS,
    assert_idle,
    assert_openai_error,
    cached,
    complete,
    sse_payloads,
    wait_until,
    words,
)

# ----------------------------------------------------------------- tiny model server


@pytest.fixture(scope="module")
def tiny_server(tiny_chat: LoadedModel) -> Iterator[tuple[str, PrefixEngine, Any]]:
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=128), loaded=tiny_chat)
    app = create_engine_app(
        engine, served_model_name="tiny", trusted_key=KEY, max_body_bytes=20_000
    )
    with serving(app) as url:
        yield url, engine, app


def test_trusted_namespace_isolation(
    tiny_server: tuple[str, PrefixEngine, Any], caplog: pytest.LogCaptureFixture
) -> None:
    url, engine, _ = tiny_server
    caplog.set_level(logging.INFO, logger="cachegate.access")
    prompt = words(30, start=7)  # 30 tokens, block 4: a full hit reuses 28
    a = {NAMESPACE_HEADER: "tenant-a", KEY_HEADER: KEY}
    assert cached(complete(url, prompt, a)) == 0
    assert cached(complete(url, prompt, a)) == 28  # positive control: same namespace reuses
    assert cached(complete(url, prompt, {NAMESPACE_HEADER: "tenant-b", KEY_HEADER: KEY})) == 0
    # Right namespace, wrong or missing key: the header is ignored → "default" (cold) ...
    assert cached(complete(url, prompt, {NAMESPACE_HEADER: "tenant-a", KEY_HEADER: "nope"})) == 0
    # ... which is where it went: a plain request now reuses what the wrong-key one cached.
    assert cached(complete(url, prompt, {NAMESPACE_HEADER: "tenant-a"})) == 28
    assert cached(complete(url, prompt)) == 28
    # A body cache_salt narrows reuse inside the tenant, never widens it.
    assert cached(complete(url, prompt, a, cache_salt="s1")) == 0
    assert cached(complete(url, prompt, a, cache_salt="s1")) == 28
    assert cached(complete(url, prompt, {KEY_HEADER: KEY}, cache_salt="s1")) == 0
    # Odd header bytes never fail a request.
    odd = {NAMESPACE_HEADER: "tenant-\xe9\xff", KEY_HEADER: "k\xe9y"}
    raw = [(k.encode(), v.encode("latin-1")) for k, v in odd.items()]
    assert cached(complete(url, prompt, raw)) == 28
    trusted = [
        (NAMESPACE_HEADER.encode(), "ns-\xe9".encode("latin-1")),
        (KEY_HEADER.encode(), KEY.encode()),
    ]
    assert cached(complete(url, prompt, trusted)) == 0
    assert_idle(engine)
    # One access line per request: request id, namespace id (a hash), status, TTFT.
    lines = [r for r in caplog.records if r.name == "cachegate.access"]
    assert len(lines) == 11
    for r in lines:
        assert r.status == 200 and r.request_id.startswith("cmpl-")  # type: ignore[attr-defined]
        assert len(r.namespace_id) == 12 and r.ttft_ms is not None  # type: ignore[attr-defined]
        assert KEY not in r.getMessage() and "tenant" not in r.getMessage()
    assert len({r.namespace_id for r in lines}) == 6  # type: ignore[attr-defined]


def test_kv_reuse_off_keeps_none_of_the_requests_kv(
    tiny_server: tuple[str, PrefixEngine, Any],
) -> None:
    url, engine, _ = tiny_server
    prompt = words(30, start=301)
    ns = {NAMESPACE_HEADER: "tenant-private", KEY_HEADER: KEY}
    before = engine.pool.num_cached_blocks
    private = ns | {KV_REUSE_HEADER: "off"}
    assert cached(complete(url, prompt, private)) == 0
    assert engine.pool.num_cached_blocks == before  # nothing of it kept
    assert cached(complete(url, prompt, private)) == 0
    assert cached(complete(url, prompt, ns)) == 0  # so a later request finds nothing
    # Positive control: the same request without the header is kept and reused.
    assert engine.pool.num_cached_blocks > before
    assert cached(complete(url, prompt, ns)) == 28
    # The header only narrows: a request marked off does not look up what is kept.
    assert cached(complete(url, prompt, private)) == 0
    engine.pool.check_integrity()


def test_the_trusted_tenant_and_quota_headers_need_the_key(
    tiny_server: tuple[str, PrefixEngine, Any],
) -> None:
    """The gateway sends whose request it is and the tenant's KV block quota with the
    engine key: keyed by namespace alone, a tenant whose end users each have a namespace
    counted as one tenant per user for the engine's slots and queue, and no quota was
    enforced outside the in-process engine. A request that alone needs more blocks than
    its quota is refused (a 400) with the key; without it the headers are ignored."""
    url, _engine, _ = tiny_server
    prompt = words(30, start=300)  # 8 blocks of 4 with its answer
    tenant = {NAMESPACE_HEADER: "user-1", TENANT_HEADER: "ab" * 16, QUOTA_HEADER: "2"}
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 2, "temperature": 0}
    refused = httpx.post(f"{url}{COMP}", json=body, headers=tenant | {KEY_HEADER: KEY})
    assert_openai_error(refused, 400)
    assert complete(url, prompt, tenant)["usage"]["prompt_tokens"] == 30  # no key: ignored
    roomy = tenant | {KEY_HEADER: KEY, QUOTA_HEADER: "64"}
    assert complete(url, prompt, roomy)["usage"]["prompt_tokens"] == 30  # the control


def test_resolve_tenant_rules() -> None:
    ok = {KEY_HEADER: KEY, TENANT_HEADER: "0f" * 16, QUOTA_HEADER: "12"}
    assert resolve_tenant(ok, KEY) == ("0f" * 16, 12)
    assert resolve_tenant(ok, None) == (None, None)  # no key configured
    assert resolve_tenant(ok | {KEY_HEADER: KEY + "x"}, KEY) == (None, None)
    assert resolve_tenant(ok | {TENANT_HEADER: "Tenant A"}, KEY) == (None, 12)
    # "²" and "٣" pass str.isdigit(); int("²") raised: a 500 (a review, session 40)
    for bad in ("0", "-3", "1e3", "x", str(2**31), "²", "1²", "٣", "1" * 5000):
        assert resolve_tenant(ok | {QUOTA_HEADER: bad}, KEY) == ("0f" * 16, None)


def test_resolve_namespace_rules() -> None:
    ns = {NAMESPACE_HEADER: "t1"}
    assert resolve_namespace(ns | {KEY_HEADER: KEY}, KEY) == "t1"
    assert resolve_namespace(ns | {KEY_HEADER: KEY}, None) == "default"  # no key configured
    # an empty key configured is none: an empty header matched it (a review, session 40)
    assert resolve_namespace(ns | {KEY_HEADER: ""}, "") == "default"
    assert resolve_tenant({KEY_HEADER: "", TENANT_HEADER: "0f" * 16}, "") == (None, None)
    assert resolve_namespace(ns | {KEY_HEADER: KEY + "x"}, KEY) == "default"
    assert resolve_namespace(ns | {KEY_HEADER: "ünï\x00"}, KEY) == "default"  # never raises
    assert resolve_namespace(ns, KEY) == "default"
    assert resolve_namespace({NAMESPACE_HEADER: "", KEY_HEADER: KEY}, KEY) == "default"
    assert resolve_namespace({KEY_HEADER: KEY}, KEY) == "default"


def test_bad_input_gets_openai_errors_and_engine_keeps_serving(
    tiny_server: tuple[str, PrefixEngine, Any],
) -> None:
    url, engine, _ = tiny_server
    with httpx.Client(base_url=url, timeout=30) as client:
        for name, path, body, status, param in BAD_INPUT:
            if isinstance(body, bytes):
                r = client.post(path, content=body, headers={"content-type": "application/json"})
            else:
                r = client.post(path, json=body)
            err = assert_openai_error(r, status)
            assert err["param"] == param, (name, err)
            if name == "n-5":
                assert err["message"] == "n > 1 is not supported"
            if name in ("prompt-too-long", "too-many-tokens"):
                assert "256" in err["message"], err  # the limit is in the message
            if name == "unknown-model":
                assert err["code"] == "model_not_found"
            if name in ("unknown-role", "function-role"):  # the roles named are those taken
                assert "function" not in err["message"] and "developer" in err["message"]
        assert_openai_error(client.get("/v1/nope"), 404)
        assert_openai_error(client.get(CHAT), 405)
        # A tiny temperature samples greedily instead of overflowing in the sampler.
        tiny_t = {
            "model": "tiny",
            "messages": MSGS,
            "max_tokens": 3,
            "temperature": 1e-300,
            "seed": 2**64 - 1,
        }
        assert client.post(CHAT, json=tiny_t).status_code == 200
        # Unknown fields are ignored; the engine still serves normally.
        ok = client.post(
            CHAT,
            json={
                "model": "tiny",
                "messages": MSGS,
                "max_tokens": 3,
                "temperature": 0,
                # Neutral values of parameters the engine does not implement are fine (a
                # real penalty is a 400 naming it: tests/gateway/proxy/test_engine_params.py).
                "frequency_penalty": 0,
                "logit_bias": {},
                "whatever": [1],
            },
        )
        assert ok.status_code == 200, ok.text
        body = ok.json()
        assert body["object"] == "chat.completion" and body["model"] == "tiny"
        assert body["choices"][0]["message"]["role"] == "assistant"
        assert body["usage"]["completion_tokens"] >= 1
        assert client.get("/health").status_code == 200
    assert_idle(engine)


def test_sse_framing_and_usage_chunk(tiny_server: tuple[str, PrefixEngine, Any]) -> None:
    url, engine, _ = tiny_server
    base = {"model": "tiny", "max_tokens": 5, "temperature": 0, "ignore_eos": True}
    chat = base | {"messages": MSGS, "stream": True, "stream_options": {"include_usage": True}}
    r = httpx.post(f"{url}{CHAT}", json=chat, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    chunks = sse_payloads(r.text)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    plain = httpx.post(f"{url}{CHAT}", json=base | {"messages": MSGS}, timeout=30).json()
    assert streamed == plain["choices"][0]["message"]["content"]

    comp = base | {"prompt": "t9 t8 t7", "stream": True}
    chunks = sse_payloads(httpx.post(f"{url}{COMP}", json=comp, timeout=30).text)
    assert all(c["object"] == "text_completion" and "usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert_idle(engine)


def test_stream_disconnect_aborts_the_request(tiny_server: tuple[str, PrefixEngine, Any]) -> None:
    url, engine, app = tiny_server
    registry = app.state.metrics.registry

    def aborted() -> float:
        return registry.get_sample_value("prefix_requests_total", {"finish_reason": "abort"}) or 0

    before = aborted()
    body = {
        "model": "tiny",
        "prompt": words(6, 40),
        "max_tokens": 250,
        "stream": True,
        "temperature": 0,
        "ignore_eos": True,
    }
    with httpx.Client(timeout=30) as client, client.stream("POST", f"{url}{COMP}", json=body) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")
    # The connection is closed: the server must abort the engine request and free its blocks.
    assert wait_until(lambda: aborted() == before + 1), "the request was not aborted"
    assert_idle(engine)


def test_metrics_after_requests(tiny_server: tuple[str, PrefixEngine, Any]) -> None:
    url, _, app = tiny_server
    prompt = words(20, start=90)
    complete(url, prompt)
    complete(url, prompt)
    text = httpx.get(f"{url}/metrics", timeout=10).text
    for name in (
        "prefix_cache_queries_total",
        "prefix_cache_hits_total",
        "prefix_cache_blocks_free",
        "prefix_cache_blocks_used",
        "prefix_cache_blocks_cached",
        "prefix_cache_evictions_total",
        "prefix_num_requests_running",
        "prefix_num_requests_waiting",
        "prefix_time_to_first_token_seconds_bucket",
        "prefix_time_per_output_token_seconds_bucket",
        'prefix_requests_total{finish_reason="length"}',
        "prefix_preemptions_total",
    ):
        assert name in text, name
    reg = app.state.metrics.registry
    queries = reg.get_sample_value("prefix_cache_queries_total")
    hits = reg.get_sample_value("prefix_cache_hits_total")
    assert queries >= 40 and 16 <= hits < queries  # tokens, not blocks
    assert reg.get_sample_value("prefix_cache_blocks_used") == 0


def test_top_k_and_stop_token_ids_are_honoured(tiny_server: tuple[str, PrefixEngine, Any]) -> None:
    """vLLM's top_k and stop_token_ids were dropped unread: top_k 1 sampled as if absent,
    and a stop id never stopped (a review, session 45)."""
    url, engine, _ = tiny_server
    base = {"model": "tiny", "prompt": "t9 t8 t7", "max_tokens": 6, "ignore_eos": True}
    greedy = httpx.post(f"{url}{COMP}", json=base | {"temperature": 0}, timeout=30).json()
    sampled = [
        httpx.post(f"{url}{COMP}", json=base | {"temperature": 1.5, "seed": s}, timeout=30)
        for s in range(3)
    ]
    texts = {r.json()["choices"][0]["text"] for r in sampled}
    assert texts != {greedy["choices"][0]["text"]}  # the control: sampling differs
    top1 = httpx.post(
        f"{url}{COMP}", json=base | {"temperature": 1.5, "seed": 0, "top_k": 1}, timeout=30
    ).json()
    assert top1["choices"][0]["text"] == greedy["choices"][0]["text"]
    first = engine.loaded.tokenizer.encode(greedy["choices"][0]["text"], add_special_tokens=False)
    stopped = httpx.post(
        f"{url}{COMP}", json=base | {"temperature": 0, "stop_token_ids": [first[1]]}, timeout=30
    ).json()
    assert stopped["choices"][0]["finish_reason"] == "stop"
    assert stopped["usage"]["completion_tokens"] == 2
    refused = httpx.post(f"{url}{COMP}", json=base | {"repetition_penalty": 1.2}, timeout=30)
    assert_openai_error(refused, 400)
    assert refused.json()["error"]["param"] == "repetition_penalty"
    bad = httpx.post(f"{url}{COMP}", json=base | {"top_k": -5}, timeout=30)
    assert_openai_error(bad, 400)
    assert bad.json()["error"]["param"] == "top_k"
    assert_idle(engine)
