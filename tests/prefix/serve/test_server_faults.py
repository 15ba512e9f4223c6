"""The engine's server when things go wrong: the engine dying before and during a
stream, and a chat template that refuses messages by quoting them (tiny random Llama,
as in test_server.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import httpx
import pytest

from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.serve.engine import PrefixEngine
from prefix.serve.server import create_engine_app
from tests.live_server import serving
from tests.prefix.server_support import (
    CHAT,
    COMP,
    KEY,
    assert_idle,
    assert_openai_error,
    sse_payloads,
)


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

    async def main() -> tuple[str, httpx.Response]:
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
                return r.text, await c.post(COMP, json=body | {"stream": False})

    streamed, later = asyncio.run(main())
    payloads = sse_payloads(streamed)
    assert payloads[-1]["error"]["code"] == "engine_dead"
    assert "choices" in payloads[0]
    # Later requests learn the exception's type, never its text (which may hold
    # anything; it is in the engine's log).
    err = assert_openai_error(later, 503)
    assert err["code"] == "engine_dead" and "RuntimeError" in err["message"]
    assert "device lost" not in err["message"]


def test_a_template_refusal_does_not_quote_the_messages(tiny_chat: LoadedModel) -> None:
    """A chat template that refuses messages by quoting them: the 400 names no text."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_chat.path)
    tok.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'system' %}"
        "{{ raise_exception('no system turn: ' + m['content']) }}{% endif %}"
        "{{ m['content'] }} {% endfor %}"
    )
    loaded = dataclasses.replace(tiny_chat, tokenizer=tok)
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=32), loaded=loaded)
    app = create_engine_app(engine, served_model_name="tiny", trusted_key=KEY)
    secret = "my card 4111 and my secret plan"
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        bad = {"role": "system", "content": secret}
        r = client.post(CHAT, json={"model": "tiny", "messages": [bad], "max_tokens": 2})
        err = assert_openai_error(r, 400)
        assert err["param"] == "messages"
        assert "chat template" in err["message"]
        assert "secret" not in r.text and "4111" not in r.text
        # control: the same template renders a user turn
        ok = {"model": "tiny", "messages": [{"role": "user", "content": secret}], "max_tokens": 2}
        assert client.post(CHAT, json=ok).status_code == 200
    assert_idle(engine)
