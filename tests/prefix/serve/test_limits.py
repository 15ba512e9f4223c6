"""Limits that keep one client from hurting the others (issue 14, engine side).

A full waiting queue answers 429 with ``Retry-After`` (the queue never grows past its
bound), stop strings are bounded in count and length (400 naming ``stop``), and the
stop check's hold-back works on the output's tail only.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.model.tokenize import _partial_stop
from prefix.serve.engine import PrefixEngine
from prefix.serve.server import create_engine_app
from protocol.sampling import MAX_STOP_CHARS
from tests.prefix.server_support import COMP, assert_idle

BODY = {"model": "tiny", "prompt": "t5 t6 t7", "max_tokens": 2}


def serve(engine: PrefixEngine, calls: object) -> None:
    app = create_engine_app(engine, served_model_name="tiny")

    async def main() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://engine") as c:
                await calls(c)  # type: ignore[operator]

    asyncio.run(main())


def test_a_full_waiting_queue_answers_429_and_never_grows(tiny_llama: LoadedModel) -> None:
    config = EngineConfig(block_size=4, num_blocks=64, max_num_seqs=1, max_num_waiting=1)
    engine = PrefixEngine(config, loaded=tiny_llama)
    long = BODY | {"max_tokens": 60, "ignore_eos": True}
    statuses: list[int] = []
    retry_after: list[str | None] = []

    async def calls(c: httpx.AsyncClient) -> None:
        rs = await asyncio.gather(*(c.post(COMP, json=long) for _ in range(6)))
        for r in rs:
            statuses.append(r.status_code)
            retry_after.append(r.headers.get("retry-after"))
            if r.status_code == 429:
                assert r.json()["error"]["code"] == "queue_full"
        # The engine keeps serving once the queue drains (positive control).
        assert (await c.post(COMP, json=BODY)).status_code == 200

    serve(engine, calls)
    assert set(statuses) == {200, 429}, statuses
    # A burst of six against one waiting slot: most are refused at once, none is lost.
    assert 1 <= statuses.count(200) <= 2
    assert all(ra == "1" for s, ra in zip(statuses, retry_after, strict=True) if s == 429)
    assert_idle(engine)


@pytest.mark.parametrize(
    ("stop", "status"),
    [
        (["a", "b", "c", "d"], 200),
        (["a", "b", "c", "d", "e"], 400),
        ("x" * MAX_STOP_CHARS, 200),
        ("x" * (MAX_STOP_CHARS + 1), 400),
        (["ok", "y" * 60_000], 400),
    ],
)
def test_stop_strings_are_bounded(tiny_llama: LoadedModel, stop: object, status: int) -> None:
    engine = PrefixEngine(EngineConfig(block_size=4, num_blocks=32), loaded=tiny_llama)

    async def calls(c: httpx.AsyncClient) -> None:
        r = await c.post(COMP, json=BODY | {"stop": stop})
        assert r.status_code == status, r.text
        if status == 400:
            error = r.json()["error"]
            assert error["param"] == "stop"
            assert "yyyy" not in error["message"]  # the client's text is not echoed

    serve(engine, calls)


@given(st.text(alphabet="ab", max_size=12), st.text(alphabet="ab", min_size=1, max_size=6))
def test_partial_stop_is_the_longest_tail_that_begins_the_stop(text: str, stop: str) -> None:
    expected = max(
        (k for k in range(1, min(len(stop) - 1, len(text)) + 1) if text.endswith(stop[:k])),
        default=0,
    )
    assert _partial_stop(text, stop) == expected
