"""The engine's OpenAI-compatible server over real sockets (uvicorn in a thread).

Fast tests run a tiny random Llama (word-level tokenizer, plus a toy chat
template) for identity, bad input, SSE framing and disconnects. The slow tests
run ONE server over the real SmolLM2 and drive it with the official ``openai``
client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from prefix.config import EngineConfig
from prefix.engine import PrefixEngine
from prefix.loader import LoadedModel
from prefix.server import KEY_HEADER, NAMESPACE_HEADER, create_engine_app, resolve_namespace
from tests.live_server import serving

KEY = "engine-secret"


def wait_until(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def assert_openai_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    assert err["type"] == ("invalid_request_error" if status < 500 else "server_error")
    return err


def assert_idle(engine: PrefixEngine) -> None:
    assert wait_until(lambda: engine.pool.num_used_blocks == 0 and not engine.has_unfinished())
    engine.pool.check_integrity()


def sse_payloads(text: str) -> list[Any]:
    events = [e for e in text.split("\n\n") if e.strip()]
    assert all(e.startswith("data: ") for e in events), events
    assert events[-1] == "data: [DONE]"
    return [json.loads(e[len("data: ") :]) for e in events[:-1]]


# ----------------------------------------------------------------- tiny model server


@pytest.fixture(scope="module")
def tiny_chat(tiny_llama: LoadedModel) -> LoadedModel:
    """The tiny Llama with its own tokenizer copy that has a toy chat template."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_llama.path)
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    return dataclasses.replace(tiny_llama, tokenizer=tok, has_chat_template=True)


@pytest.fixture(scope="module")
def tiny_server(tiny_chat: LoadedModel) -> Iterator[tuple[str, PrefixEngine, Any]]:
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=128), loaded=tiny_chat)
    app = create_engine_app(
        engine, served_model_name="tiny", trusted_key=KEY, max_body_bytes=20_000
    )
    with serving(app) as url:
        yield url, engine, app


def words(n: int, start: int) -> str:
    return " ".join(f"t{3 + (start + i) % 125}" for i in range(n))


def complete(url: str, prompt: str, headers: Any = None, **body: Any) -> dict[str, Any]:
    payload = {"model": "tiny", "prompt": prompt, "max_tokens": 2, "temperature": 0} | body
    r = httpx.post(f"{url}/v1/completions", json=payload, headers=headers or {}, timeout=30)
    assert r.status_code == 200, r.text
    return dict(r.json())


def cached(resp: dict[str, Any]) -> int:
    return int(resp["usage"]["prompt_tokens_details"]["cached_tokens"])


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


def test_dead_engine_answers_503(tiny_chat: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=32), loaded=tiny_chat)
    app = create_engine_app(engine, served_model_name="tiny")
    body = {"model": "tiny", "prompt": "t5 t6 t7", "max_tokens": 2}

    def boom() -> None:
        raise RuntimeError("device lost")

    async def main() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://engine") as c:
                assert (await c.post(COMP, json=body)).status_code == 200
                monkeypatch.setattr(engine, "step", boom)
                # Dies while serving: the in-flight request (plain and streamed) fails cleanly.
                assert_openai_error(await c.post(COMP, json=body), 503)
                r = await c.post(COMP, json=body | {"stream": True})
                assert_openai_error(r, 503)  # refused up front now: the engine is known dead
                assert_openai_error(await c.get("/health"), 503)

    asyncio.run(main())


def test_engine_dying_mid_stream_ends_the_stream_with_an_error(
    tiny_chat: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=32), loaded=tiny_chat)
    app = create_engine_app(engine, served_model_name="tiny")
    real_step = engine.step
    steps = 0

    def flaky() -> Any:
        nonlocal steps
        steps += 1
        if steps > 3:
            raise RuntimeError("device lost")
        return real_step()

    async def main() -> str:
        async with app.router.lifespan_context(app):
            monkeypatch.setattr(engine, "step", flaky)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://engine") as c:
                body = {
                    "model": "tiny",
                    "prompt": "t5 t6 t7",
                    "max_tokens": 50,
                    "ignore_eos": True,
                    "stream": True,
                }
                r = await c.post(COMP, json=body)
                assert r.status_code == 200
                return r.text

    payloads = sse_payloads(asyncio.run(main()))
    assert payloads[-1]["error"]["code"] == "engine_dead"
    assert "choices" in payloads[0]


def test_resolve_namespace_rules() -> None:
    ns = {NAMESPACE_HEADER: "t1"}
    assert resolve_namespace(ns | {KEY_HEADER: KEY}, KEY) == "t1"
    assert resolve_namespace(ns | {KEY_HEADER: KEY}, None) == "default"  # no key configured
    assert resolve_namespace(ns | {KEY_HEADER: KEY + "x"}, KEY) == "default"
    assert resolve_namespace(ns | {KEY_HEADER: "ünï\x00"}, KEY) == "default"  # never raises
    assert resolve_namespace(ns, KEY) == "default"
    assert resolve_namespace({NAMESPACE_HEADER: "", KEY_HEADER: KEY}, KEY) == "default"
    assert resolve_namespace({KEY_HEADER: KEY}, KEY) == "default"


CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
MSGS = [{"role": "user", "content": "t5 t6 t7"}]
BAD_INPUT: list[tuple[str, str, Any, int, str | None]] = [
    # (id, path, body (bytes are sent raw), status, expected param)
    ("malformed-json", CHAT, b'{"model": "tiny", "messages": [', 400, None),
    ("not-an-object", CHAT, b"[1, 2]", 400, None),
    ("empty-body", CHAT, b"", 400, None),
    ("nan-literal", CHAT, b'{"model": "tiny", "messages": [], "temperature": NaN}', 400, None),
    ("missing-messages", CHAT, {"model": "tiny"}, 400, "messages"),
    ("missing-model", CHAT, {"messages": MSGS}, 400, "model"),
    ("messages-int", CHAT, {"model": "tiny", "messages": 5}, 400, "messages"),
    (
        "max-tokens-str",
        CHAT,
        {"model": "tiny", "messages": MSGS, "max_tokens": "x"},
        400,
        "max_tokens",
    ),
    (
        "max-tokens-numeric-str",
        CHAT,
        {"model": "tiny", "messages": MSGS, "max_tokens": "5"},
        400,
        "max_tokens",
    ),
    ("n-5", CHAT, {"model": "tiny", "messages": MSGS, "n": 5}, 400, "n"),
    (
        "negative-max-tokens",
        CHAT,
        {"model": "tiny", "messages": MSGS, "max_tokens": -1},
        400,
        "max_tokens",
    ),
    (
        "zero-max-completion-tokens",
        CHAT,
        {"model": "tiny", "messages": MSGS, "max_completion_tokens": 0},
        400,
        "max_tokens",
    ),
    ("unknown-model", CHAT, {"model": "gpt-9", "messages": MSGS}, 404, "model"),
    (
        "oversize-body",
        CHAT,
        {"model": "tiny", "messages": [{"role": "user", "content": "t5 " * 20_000}]},
        413,
        None,
    ),
    ("empty-messages", CHAT, {"model": "tiny", "messages": []}, 400, "messages"),
    (
        "unknown-role",
        CHAT,
        {"model": "tiny", "messages": [{"role": "wizard", "content": "t5"}]},
        400,
        "messages",
    ),
    (
        "image-part",
        CHAT,
        {
            "model": "tiny",
            "messages": [
                {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
            ],
        },
        400,
        "messages",
    ),
    (
        "temperature-5",
        CHAT,
        {"model": "tiny", "messages": MSGS, "temperature": 5},
        400,
        "temperature",
    ),
    (
        "temperature-bool",
        CHAT,
        {"model": "tiny", "messages": MSGS, "temperature": True},
        400,
        "temperature",
    ),
    ("seed-too-big", CHAT, {"model": "tiny", "messages": MSGS, "seed": 2**64}, 400, "seed"),
    ("top-p-0", CHAT, {"model": "tiny", "messages": MSGS, "top_p": 0}, 400, "top_p"),
    ("five-stops", CHAT, {"model": "tiny", "messages": MSGS, "stop": list("abcde")}, 400, "stop"),
    ("empty-stop", CHAT, {"model": "tiny", "messages": MSGS, "stop": [""]}, 400, "stop"),
    ("stream-bad", CHAT, {"model": "tiny", "messages": 5, "stream": True}, 400, "messages"),
    (
        "too-many-tokens",
        CHAT,
        {"model": "tiny", "messages": MSGS, "max_tokens": 10_000},
        400,
        "messages",
    ),
    ("prompt-too-long", COMP, {"model": "tiny", "prompt": words(300, 0)}, 400, "prompt"),
    ("empty-prompt", COMP, {"model": "tiny", "prompt": ""}, 400, "prompt"),
    ("token-out-of-range", COMP, {"model": "tiny", "prompt": [5, 999]}, 400, "prompt"),
    ("two-prompts", COMP, {"model": "tiny", "prompt": ["t5", "t6"]}, 400, "prompt"),
    ("missing-prompt", COMP, {"model": "tiny"}, 400, "prompt"),
    ("cache-salt-int", COMP, {"model": "tiny", "prompt": "t5", "cache_salt": 3}, 400, "cache_salt"),
]


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
                "frequency_penalty": 0.5,
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


# ----------------------------------------------------------------- real SmolLM2


SYSTEM = (
    "You are the support assistant of Northwind Bank. Answer in one or two short sentences, "
    "politely and precisely. Never ask for passwords or full card numbers. Transfers between "
    "Northwind accounts are instant; transfers to other banks take one business day; "
    "international transfers in euros take up to three business days and cost 5 EUR. "
    "Card disputes must be raised within 60 days of the transaction date."
)


@pytest.fixture(scope="module")
def smol_server(smol_loaded: LoadedModel) -> Iterator[tuple[str, PrefixEngine, Any]]:
    engine = PrefixEngine(EngineConfig(block_size=16, num_blocks=256), loaded=smol_loaded)
    app = create_engine_app(engine, served_model_name="smollm2", trusted_key=KEY)
    with serving(app) as url:
        yield url, engine, app


@pytest.fixture(scope="module")
def openai_client(smol_server: tuple[str, PrefixEngine, Any]) -> Any:
    import openai

    return openai.OpenAI(base_url=f"{smol_server[0]}/v1", api_key="unused", max_retries=0)


def ask(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


@pytest.mark.slow
def test_openai_chat_reuses_a_repeated_system_prompt(openai_client: Any) -> None:
    first = openai_client.chat.completions.create(
        model="smollm2",
        messages=ask("How long does a transfer abroad take?"),
        max_tokens=12,
        temperature=0,
    )
    assert first.object == "chat.completion" and first.model == "smollm2"
    assert first.choices[0].message.content.strip()
    assert first.choices[0].finish_reason in ("stop", "length")
    assert first.usage.prompt_tokens > 64
    second = openai_client.chat.completions.create(
        model="smollm2",
        messages=ask("Is there a fee for card disputes?"),
        max_tokens=8,
        temperature=0,
    )
    reused = second.usage.prompt_tokens_details.cached_tokens
    assert reused >= 64 and reused % 16 == 0, reused  # the system prompt's full blocks
    assert second.usage.total_tokens == second.usage.prompt_tokens + second.usage.completion_tokens


@pytest.mark.slow
def test_openai_completion(openai_client: Any) -> None:
    r = openai_client.completions.create(
        model="smollm2", prompt="The capital of France is", max_tokens=6, temperature=0
    )
    assert r.object == "text_completion" and r.choices[0].text.strip()
    assert r.usage.completion_tokens <= 6


@pytest.mark.slow
def test_openai_streaming_matches_non_streaming(openai_client: Any) -> None:
    messages = ask("Can I dispute a card payment from last week?")
    plain = openai_client.chat.completions.create(
        model="smollm2", messages=messages, max_tokens=10, temperature=0
    )
    stream = openai_client.chat.completions.create(
        model="smollm2",
        messages=messages,
        max_tokens=10,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens > 0
    comp = openai_client.completions.create(
        model="smollm2", prompt="Once upon a time", max_tokens=6, temperature=0, stream=True
    )
    pieces = list(comp)
    assert "".join(p.choices[0].text for p in pieces).strip()
    assert pieces[-1].choices[0].finish_reason in ("stop", "length")


@pytest.mark.slow
def test_openai_errors_and_models_health_metrics(
    openai_client: Any, smol_server: tuple[str, PrefixEngine, Any]
) -> None:
    import openai

    url, engine, _ = smol_server
    with pytest.raises(openai.BadRequestError, match="n > 1 is not supported"):
        openai_client.chat.completions.create(model="smollm2", messages=ask("hi"), n=2)
    with pytest.raises(openai.NotFoundError):
        openai_client.chat.completions.create(model="gpt-4o", messages=ask("hi"))
    assert [m.id for m in openai_client.models.list()] == ["smollm2"]
    health = httpx.get(f"{url}/health", timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    openai_client.chat.completions.create(  # at least one hit, whatever ran before
        model="smollm2", messages=ask("What is the dispute window?"), max_tokens=2
    )
    openai_client.chat.completions.create(
        model="smollm2", messages=ask("What is the dispute window?"), max_tokens=2
    )
    text = httpx.get(f"{url}/metrics", timeout=10).text
    values = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    queries = values["prefix_cache_queries_total"]
    hits = values["prefix_cache_hits_total"]
    assert queries > 100 and 0 < hits < queries
    assert values["prefix_cache_blocks_used"] == 0
    assert values["prefix_cache_blocks_cached"] > 0
    assert values["prefix_time_to_first_token_seconds_count"] >= 2
    assert_idle(engine)


@pytest.mark.slow
def test_non_streaming_client_timeout_aborts(smol_server: tuple[str, PrefixEngine, Any]) -> None:
    url, engine, app = smol_server
    registry = app.state.metrics.registry

    def aborted() -> float:
        return registry.get_sample_value("prefix_requests_total", {"finish_reason": "abort"}) or 0

    before = aborted()
    body = {
        "model": "smollm2",
        "prompt": "Count to one thousand:",
        "max_tokens": 500,
        "ignore_eos": True,
    }
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{url}{COMP}", json=body, timeout=httpx.Timeout(30, read=0.5))
    assert wait_until(lambda: aborted() == before + 1, timeout=10)
    assert_idle(engine)
