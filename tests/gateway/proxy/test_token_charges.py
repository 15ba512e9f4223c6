"""What a miss is charged to its tenant's ``rate_limit_tpm`` bucket (gateway/proxy/miss.py,
token_limit.py), driven through ``UpstreamAnswer.stream`` with the pipeline stubbed (the
live paths: tests/gateway/proxy/test_token_limit.py and relay/test_token_limit_relay.py).

Once, and what the answer cost: a client that leaves after ``[DONE]`` while the backfill
runs was charged twice (its chunks, then the whole answer; a review: 3 + 103 for 103);
an upstream that says no ``usage`` (a generic one's stream without ``include_usage``)
was charged nothing; a stream cut short, its chunks but not its prompt.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from unittest.mock import MagicMock

import anyio
import pytest

from gateway.proxy.miss import UpstreamAnswer
from gateway.proxy.token_limit import estimate_prompt_tokens
from gateway.proxy.upstream import Delta, Done, Event
from protocol.responses import ChunkWriter

PROMPT = "x" * 400  # 100 tokens at four characters a token


def answer(charges: list[int], backfill_seconds: float = 0.0) -> UpstreamAnswer:
    async def backfill(*args: Any, **kwargs: Any) -> str:
        await asyncio.sleep(backfill_seconds)
        return "stored"

    gw = MagicMock()
    gw.stats = gw.saved = None
    gw.pipeline.backfill = backfill
    gw.charge_tokens = lambda ctx, n: charges.append(n)
    decision = MagicMock()
    decision.result = None
    body = {"model": "m", "prompt": PROMPT}
    return UpstreamAnswer(gw, MagicMock(), "completion", body, decision, MagicMock(), "id", 0.0)


async def events(done: Done | None, chunks: int = 3, delay: float = 0.0) -> AsyncIterator[Event]:
    for i in range(chunks):
        await asyncio.sleep(delay)
        yield Delta(f"w{i}")
    if done is not None:
        yield done


async def run(ans: UpstreamAnswer, source: AsyncIterator[Event], leave_after: float) -> None:
    """The stream read as Starlette reads it, the client leaving after ``leave_after``
    seconds (its task group cancelled), then the shielded finish given time to end."""
    first = await anext(source)
    body = ans.stream(first, source, ChunkWriter("completion", "id", "m", False))

    async def consume() -> None:
        async for _ in body:
            pass

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await asyncio.sleep(leave_after)
        group.cancel_scope.cancel()
    await asyncio.sleep(0.5)


def test_a_client_leaving_after_done_is_charged_the_answer_once() -> None:
    charges: list[int] = []
    done = Done("length", prompt_tokens=100, completion_tokens=3)
    asyncio.run(run(answer(charges, backfill_seconds=0.3), events(done), leave_after=0.1))
    assert charges == [103]
    # control: read to its end, the same answer is charged the same
    charges.clear()
    asyncio.run(run(answer(charges), events(done), leave_after=0.3))
    assert charges == [103]


def test_an_answer_without_usage_is_charged_an_estimate() -> None:
    charges: list[int] = []
    asyncio.run(run(answer(charges), events(Done("stop", usage_known=False)), leave_after=0.3))
    assert charges == [100 + 3]  # the prompt at 4 characters a token, and the chunks


def test_a_stream_cut_short_is_charged_its_prompt_and_what_it_was_sent() -> None:
    charges: list[int] = []
    slow = events(Done("length", prompt_tokens=100, completion_tokens=50), 50, delay=0.02)
    asyncio.run(run(answer(charges), slow, leave_after=0.2))
    assert len(charges) == 1 and 100 + 3 <= charges[0] < 100 + 50


@pytest.mark.parametrize(
    ("body", "tokens"),
    [
        ({"prompt": "abcdefgh"}, 2),
        ({"prompt": [1, 2, 3]}, 3),  # token ids count as themselves
        ({"prompt": [[1, 2], [3]]}, 3),
        ({"messages": [{"role": "user", "content": "hello world!"}]}, 3),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "abcd"}]}]}, 1),
        ({"messages": "not a list", "prompt": None}, 0),
        ({"prompt": "怎么修改登录密码"}, 8),  # a token a character, not a quarter
        ({"prompt": "请问 refund 怎么办"}, 5 + 2),  # 5 CJK, 8 other characters
        # what the model reads besides the text: a tool's definition, a schema, a call
        ({"prompt": "", "tools": [{"name": "x" * 386}]}, 100),  # 400 characters of JSON
        ({"prompt": "", "response_format": {"type": "x" * 388}}, 100),
        ({"messages": [{"role": "assistant", "content": None, "tool_calls": ["y" * 380]}]}, 100),
        ({"prompt": "ab", "suffix": "cd"}, 1),
    ],
)
def test_the_prompt_estimate(body: dict[str, Any], tokens: int) -> None:
    assert estimate_prompt_tokens(body) == tokens
