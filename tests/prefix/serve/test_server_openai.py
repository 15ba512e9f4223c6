"""The engine's OpenAI-compatible server over the real SmolLM2: ONE server (uvicorn in
a thread) driven by the official ``openai`` client (all slow).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from prefix.serve.server import create_engine_app
from tests.live_server import serving
from tests.prefix.server_support import (
    COMP,
    KEY,
    assert_idle,
    wait_until,
)

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
