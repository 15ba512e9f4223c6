"""The gateway end to end: one live uvicorn server (built once) over the real SmolLM2
engine (in-process), the real all-MiniLM-L6-v2 embedder and a real SQLite file,
driven by the official ``openai`` client and by raw ``httpx``.

Every test makes its own tenant, so each starts with an empty semantic
partition and a cold prefix namespace of its own. Answers are greedy
(temperature 0) and short (a one-sentence system prompt), so they end with
"stop" inside max_tokens and are backfilled.

This file: service endpoints, the semantic and prefix layers, streaming;
test_e2e_tenants.py: tenant isolation, cache controls, auth, policy, metrics.
Both share one session-scoped gateway (``e2e_gw`` in conftest.py).
"""

from __future__ import annotations

import httpx
import pytest

from gateway.policy import DEFAULT_THRESHOLD
from tests.gateway.conftest import (
    BLOCK_SIZE,
    LONG_SYSTEM,
    MAX_TOKENS,
    Gateway,
    assert_openai_error,
    chat_body,
    content,
    metric,
    sse_payloads,
    wait_until,
)
from tests.gateway.e2e_support import (
    CAPITAL,
    CAPITAL_PARAPHRASES,
    CHAT,
    SEND_100,
    SEND_900,
    SKY,
    SKY_PARAPHRASE,
    ask,
    engine_of,
    engine_requests,
    post,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def gw(e2e_gw: Gateway) -> Gateway:
    """The session's end-to-end gateway (tests/gateway/conftest.py), built once for
    test_e2e*.py."""
    return e2e_gw


# ----------------------------------------------------------------- service endpoints


def test_models_health_ready_and_text_completions(gw: Gateway) -> None:
    _, key = gw.tenant("svc")
    models = gw.openai(key).models.list()
    assert [m.id for m in models.data] == [gw.model]
    assert models.data[0].owned_by == "cachegate"
    assert_openai_error(httpx.get(f"{gw.url}/v1/models", timeout=10), 401)

    assert httpx.get(f"{gw.url}/health", timeout=10).json() == {"status": "ok"}
    ready = httpx.get(f"{gw.url}/ready", timeout=10)
    assert ready.status_code == 200, ready.text
    assert ready.json() == {
        "ready": True,
        "checks": {
            "upstream": True,
            "database": True,
            "semantic_store": True,
            "verifier_loaded": True,  # no verifier here: nothing to wait for
        },
    }

    # /v1/completions through the openai client: a truncated answer is never backfilled.
    raw = gw.openai(key).completions.with_raw_response.create(
        model=gw.model, prompt="The capital of France is", max_tokens=4, temperature=0
    )
    completion = raw.parse()
    assert completion.object == "text_completion" and completion.choices[0].text
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None and completion.usage.completion_tokens == 4
    assert raw.headers["x-cachegate-backfill"] == "skipped:truncated"


# ----------------------------------------------------------------- semantic layer


def test_semantic_hit_on_a_paraphrase(gw: Gateway) -> None:
    _, key = gw.tenant("para")
    client = gw.openai(key)
    first_raw = client.chat.completions.with_raw_response.create(
        model=gw.model, messages=ask(CAPITAL), max_tokens=MAX_TOKENS, temperature=0
    )
    assert first_raw.headers["x-cachegate-semantic"] == "miss:empty"
    assert first_raw.headers["x-cachegate-cache"] == "miss"
    assert first_raw.headers["x-cachegate-backfill"] == "stored"
    first = first_raw.parse()
    answer = first.choices[0].message.content
    assert first.choices[0].finish_reason == "stop" and answer and answer.strip()
    assert first.usage is not None
    ran = engine_requests(gw)

    second_raw = client.chat.completions.with_raw_response.create(
        model=gw.model, messages=ask(CAPITAL_PARAPHRASES[0]), max_tokens=MAX_TOKENS, temperature=0
    )
    assert second_raw.headers["x-cachegate-cache"] == "semantic-hit"
    assert second_raw.headers["x-cachegate-semantic"] == "hit"
    similarity = float(second_raw.headers["x-cachegate-similarity"])
    assert DEFAULT_THRESHOLD <= similarity < 0.9999, similarity
    second = second_raw.parse()
    assert second.choices[0].message.content == answer
    assert second.choices[0].finish_reason == "stop"
    assert second.id != first.id and second.id.startswith("chatcmpl-")
    assert second.model == gw.model and second.object == "chat.completion"
    assert second.usage is not None
    assert second.usage.prompt_tokens == first.usage.prompt_tokens
    assert second.usage.completion_tokens == first.usage.completion_tokens
    assert second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details.cached_tokens == second.usage.prompt_tokens
    assert second_raw.headers["x-cachegate-cached-tokens"] == str(second.usage.prompt_tokens)

    # The other paraphrase over raw httpx: the same answer, and still no inference.
    with gw.http(key) as http:
        third = post(http, chat_body(gw.model, CAPITAL_PARAPHRASES[1]))
    assert third.headers["x-cachegate-cache"] == "semantic-hit"
    assert content(third) == answer
    assert engine_requests(gw) == ran


def test_entity_changed_question_misses_and_the_model_answers(gw: Gateway) -> None:
    tenant, key = gw.tenant("entity")
    with gw.http(key) as http:
        first = post(http, chat_body(gw.model, SEND_100))
        assert first.headers["x-cachegate-backfill"] == "stored"
        ran = engine_requests(gw)

        changed = post(http, chat_body(gw.model, SEND_900))
        assert changed.headers["x-cachegate-semantic"] == "miss:entity_mismatch:amount"
        assert changed.headers["x-cachegate-cache"] in ("miss", "prefix-hit")
        assert "x-cachegate-similarity" not in changed.headers
        assert engine_requests(gw) == ran + 1  # the model answered it
        assert changed.json()["usage"]["completion_tokens"] >= 1
        assert changed.headers["x-cachegate-backfill"] == "stored"  # an entry of its own

        # Each amount now hits its own entry, never the other one.
        again_900 = post(http, chat_body(gw.model, SEND_900))
        again_100 = post(http, chat_body(gw.model, SEND_100))
    assert again_900.headers["x-cachegate-cache"] == "semantic-hit"
    assert again_100.headers["x-cachegate-cache"] == "semantic-hit"
    assert content(again_900) == content(changed)
    assert content(again_100) == content(first)
    assert engine_requests(gw) == ran + 1
    text = gw.metrics()
    assert metric(text, "cachegate_validator_rejections_total", tenant=tenant, kind="amount") == 1
    assert (
        metric(text, "cachegate_semantic_misses_total", tenant=tenant, reason="entity_mismatch")
        == 1
    )


def test_backfill_then_hit_without_inference(gw: Gateway) -> None:
    tenant, key = gw.tenant("backfill")
    body = chat_body(gw.model, "How many legs does a spider have?")
    assert gw.semantic_verdict(tenant, body) == "empty"
    with gw.http(key) as http:
        first = post(http, body)
        assert first.headers["x-cachegate-semantic"] == "miss:empty"
        assert first.headers["x-cachegate-backfill"] == "stored"
        assert first.json()["choices"][0]["finish_reason"] == "stop"
        assert gw.semantic_verdict(tenant, body) is None  # the cache itself now holds it
        ran = engine_requests(gw)
        second = post(http, body)
    assert engine_requests(gw) == ran  # zero inference
    assert second.headers["x-cachegate-cache"] == "semantic-hit"
    assert second.headers["x-cachegate-similarity"] == "1.0000"
    assert content(second) == content(first)
    assert second.json()["usage"]["prompt_tokens"] == first.json()["usage"]["prompt_tokens"]
    assert second.headers["x-request-id"] == second.json()["id"] != first.json()["id"]


# ----------------------------------------------------------------- prefix layer


def test_prefix_hit_visible_in_cached_tokens(gw: Gateway) -> None:
    _, key = gw.tenant("prefix")
    client = gw.openai(key)
    first_raw = client.chat.completions.with_raw_response.create(
        model=gw.model,
        messages=ask("How long does a transfer abroad take?", LONG_SYSTEM),
        max_tokens=6,
        temperature=0,
    )
    first = first_raw.parse()
    assert first.usage is not None and first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens > 64
    assert first.usage.prompt_tokens_details.cached_tokens == 0  # a cold namespace
    assert first_raw.headers["x-cachegate-cache"] == "miss"
    assert first_raw.headers["x-cachegate-cached-tokens"] == "0"

    second_raw = client.chat.completions.with_raw_response.create(
        model=gw.model,
        messages=ask("Is there a fee for card disputes?", LONG_SYSTEM),
        max_tokens=6,
        temperature=0,
    )
    second = second_raw.parse()
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    reused = second.usage.prompt_tokens_details.cached_tokens
    assert reused is not None
    assert 64 <= reused < second.usage.prompt_tokens and reused % BLOCK_SIZE == 0, reused
    assert second_raw.headers["x-cachegate-cache"] == "prefix-hit"
    assert second_raw.headers["x-cachegate-cached-tokens"] == str(reused)
    assert second_raw.headers["x-cachegate-semantic"].startswith("miss")


# ----------------------------------------------------------------- streaming


def test_streaming_miss_then_semantic_hit_replayed_as_sse(gw: Gateway) -> None:
    tenant, key = gw.tenant("stream")
    client = gw.openai(key)
    ran = engine_requests(gw)
    # A miss streams token by token from the engine (openai client iterating the SSE).
    miss_raw = client.chat.completions.with_raw_response.create(
        model=gw.model,
        messages=ask(SKY),
        max_tokens=MAX_TOKENS,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    assert miss_raw.headers["content-type"].startswith("text/event-stream")
    assert miss_raw.headers["x-cachegate-cache"] == "miss"
    assert miss_raw.headers["x-cachegate-semantic"] == "miss:empty"
    assert miss_raw.headers["x-cachegate-cached-tokens"] == "0"
    chunks = list(miss_raw.parse())
    assert engine_requests(gw) == ran + 1
    assert {c.id for c in chunks} == {miss_raw.headers["x-request-id"]}
    deltas = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and not any(finishes[:-1])
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    assert usage.completion_tokens >= len(deltas) >= 3  # one event per token, not one blob
    answer = "".join(deltas)
    assert answer.strip()

    # The streamed answer was collected and backfilled: the paraphrase is a hit,
    # replayed as a valid SSE stream the openai client can iterate.
    hit_raw = client.chat.completions.with_raw_response.create(
        model=gw.model,
        messages=ask(SKY_PARAPHRASE),
        max_tokens=MAX_TOKENS,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    assert hit_raw.headers["x-cachegate-cache"] == "semantic-hit"
    assert hit_raw.headers["content-type"].startswith("text/event-stream")
    hit_chunks = list(hit_raw.parse())
    assert hit_chunks[0].choices[0].delta.role == "assistant"
    replayed = "".join(c.choices[0].delta.content or "" for c in hit_chunks if c.choices)
    assert replayed == answer
    hit_usage = hit_chunks[-1].usage
    assert hit_usage is not None and hit_usage.completion_tokens == usage.completion_tokens
    assert [c.choices[0].finish_reason for c in hit_chunks if c.choices][-1] == "stop"
    assert engine_requests(gw) == ran + 1  # the replay ran no inference

    # The same hit over raw httpx: SSE framing, chunk objects, usage only at the end.
    body = chat_body(gw.model, SKY_PARAPHRASE, stream=True, stream_options={"include_usage": True})
    with gw.http(key) as http:
        r = post(http, body)
        plain = post(http, chat_body(gw.model, SKY_PARAPHRASE))  # not streamed: the same text
    payloads = sse_payloads(r.text)
    assert all(p["object"] == "chat.completion.chunk" for p in payloads)
    assert {p["id"] for p in payloads} == {r.headers["x-request-id"]}
    assert all(p["usage"] is None for p in payloads[:-1])
    assert payloads[-1]["choices"] == [] and payloads[-1]["usage"]["completion_tokens"] >= 1
    text = "".join(p["choices"][0]["delta"].get("content", "") for p in payloads[:-1])
    assert text == answer == content(plain)
    assert (
        len([p for p in payloads if p["choices"] and p["choices"][0]["delta"].get("content")]) > 1
    )
    assert engine_requests(gw) == ran + 1
    assert (
        metric(gw.metrics(), "cachegate_semantic_hits_total", tenant=tenant) == 3
    )  # two streamed replays and one plain


def test_streamed_miss_without_usage_option_and_client_disconnect(gw: Gateway) -> None:
    tenant, key = gw.tenant("disc")
    # Without stream_options.include_usage there is no usage chunk (as in the OpenAI API).
    short = chat_body(gw.model, "Name a fruit.", max_tokens=4, stream=True)
    with gw.http(key) as http:
        payloads = sse_payloads(post(http, short).text)
    assert payloads and all("usage" not in p for p in payloads)
    assert payloads[-1]["choices"][0]["finish_reason"] in ("stop", "length")

    # A client that disconnects mid-stream aborts the engine request; nothing is backfilled.
    body = chat_body(
        gw.model, "Write a very long story about a dragon.", max_tokens=200, stream=True
    )
    body["ignore_eos"] = True  # our engine's extension: it would run all 200 tokens
    aborted = engine_requests(gw, finish_reason="abort")
    with (
        gw.http(key) as http,
        http.stream("POST", CHAT, json=body) as r,
    ):
        assert r.status_code == 200
        lines = r.iter_lines()
        assert next(lines).startswith("data: ")
    assert wait_until(lambda: engine_requests(gw, finish_reason="abort") == aborted + 1)
    engine = engine_of(gw)
    assert wait_until(lambda: engine.pool.num_used_blocks == 0 and not engine.has_unfinished())
    assert gw.semantic_verdict(tenant, body) == "empty"
