"""Serving under concurrency (tiny Llama): batching, preemption and cancellation stay exact.

Every generation is compared token for token with the same prompt run alone,
sequentially, through a fresh engine with prefix caching off; afterwards every
block's ref count is back to 0 and the pool's invariants hold.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

from prefix.config import EngineConfig
from prefix.model.loader import LoadedModel
from prefix.model.sampling import SamplingParams
from prefix.serve.async_engine import AsyncEngine
from prefix.serve.engine import PrefixEngine, RequestOutput


def tokens(n: int, seed: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, 128, (n,), generator=gen).tolist()


def make(loaded: LoadedModel, **kw: Any) -> PrefixEngine:
    return PrefixEngine(EngineConfig(**({"block_size": 4, "num_blocks": 128} | kw)), loaded=loaded)


def alone(loaded: LoadedModel, prompts: list[list[int]], params: SamplingParams) -> list[list[int]]:
    """Each prompt run by itself, one after another, with no prefix caching."""
    plain = make(loaded, enable_prefix_caching=False)
    return [plain.generate(p, params).token_ids for p in prompts]


def assert_idle(engine: PrefixEngine) -> None:
    engine.pool.check_integrity()
    assert engine.pool.num_used_blocks == 0
    assert not engine.has_unfinished()


async def run_one(
    ae: AsyncEngine, prompt: list[int], params: SamplingParams, **kw: Any
) -> tuple[list[int], RequestOutput]:
    got: list[int] = []
    last: RequestOutput | None = None
    async for out in ae.generate(ae.engine.request(prompt, params, **kw)):
        got.extend(out.new_token_ids)
        last = out
    assert last is not None and last.finished
    return got, last


def with_async_engine(
    engine: PrefixEngine, body: Callable[[AsyncEngine], Any], on_output: Any = None
) -> Any:
    async def main() -> Any:
        ae = AsyncEngine(engine, on_output=on_output)
        ae.start()
        try:
            return await asyncio.wait_for(body(ae), timeout=120)
        finally:
            await asyncio.to_thread(ae.shutdown)

    return asyncio.run(main())


def test_concurrent_shared_prefix_matches_sequential(tiny_llama: LoadedModel) -> None:
    prefix = tokens(40, seed=1)
    prompts = [prefix + tokens(3, seed=100 + i) for i in range(16)]
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    expected = alone(tiny_llama, prompts, params)
    engine = make(tiny_llama)
    running: list[int] = []

    async def body(ae: AsyncEngine) -> tuple[list[Any], list[Any]]:
        # Wave 1: all cold, admitted together (identical prefix blocks committed twice).
        cold = await asyncio.gather(*(run_one(ae, p, params) for p in prompts))
        # Wave 2: the shared 40-token prefix is now cached for everyone.
        warm = await asyncio.gather(*(run_one(ae, p, params) for p in prompts))
        return cold, warm

    cold, warm = with_async_engine(
        engine, body, on_output=lambda out: running.append(engine.num_running)
    )
    assert [t for t, _ in cold] == expected
    assert [t for t, _ in warm] == expected
    assert [last.cached_tokens for _, last in warm] == [40] * 16
    assert max(running) > 1  # requests really were batched
    assert_idle(engine)


def test_preemption_completes_every_request_exactly(tiny_llama: LoadedModel) -> None:
    # 6 prompts of 10 tokens (3 blocks each) + 16 generated (7 blocks at the end): the
    # 12-block pool admits 4, then runs out of blocks while they decode.
    prompts = [tokens(10, seed=200 + i) for i in range(6)]
    params = SamplingParams(max_tokens=16, ignore_eos=True)
    expected = alone(tiny_llama, prompts, params)
    engine = make(tiny_llama, num_blocks=12)
    ids = [engine.add_request(engine.request(p, params)) for p in prompts]  # all queued first
    got: dict[str, list[int]] = {rid: [] for rid in ids}
    reasons: dict[str, str | None] = {}
    while engine.has_unfinished():
        for out in engine.step():
            got[out.request_id].extend(out.new_token_ids)
            if out.finished:
                reasons[out.request_id] = out.finish_reason
        engine.pool.check_integrity()
    assert engine.scheduler.num_preemptions > 0
    assert [got[rid] for rid in ids] == expected
    assert all(reasons[rid] == "length" for rid in ids)
    assert_idle(engine)


def test_preemption_through_async_engine(tiny_llama: LoadedModel) -> None:
    prompts = [tokens(10, seed=300 + i) for i in range(6)]
    params = SamplingParams(max_tokens=16, ignore_eos=True)
    expected = alone(tiny_llama, prompts, params)
    engine = make(tiny_llama, num_blocks=12)

    async def body(ae: AsyncEngine) -> list[Any]:
        return await asyncio.gather(*(run_one(ae, p, params) for p in prompts))

    results = with_async_engine(engine, body)
    assert [t for t, _ in results] == expected
    assert_idle(engine)


def test_cancelled_stream_frees_its_blocks(tiny_llama: LoadedModel) -> None:
    engine = make(tiny_llama)
    long_prompt, other_prompt = tokens(10, seed=400), tokens(12, seed=401)
    other_params = SamplingParams(max_tokens=30, ignore_eos=True)
    [expected_other] = alone(tiny_llama, [other_prompt], other_params)
    seen: list[RequestOutput] = []

    async def body(ae: AsyncEngine) -> tuple[int, list[int], int]:
        other = asyncio.create_task(run_one(ae, other_prompt, other_params))
        agen = ae.generate(
            ae.engine.request(
                long_prompt, SamplingParams(max_tokens=200, ignore_eos=True), request_id="gone"
            )
        )
        received = 0
        async for out in agen:
            received += len(out.new_token_ids)
            if received >= 3:
                break  # the client goes away mid-stream
        await agen.aclose()
        other_tokens, _ = await other
        deadline = time.monotonic() + 5
        while engine.pool.num_used_blocks and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return received, other_tokens, engine.pool.num_used_blocks

    _received, other_tokens, used_after = with_async_engine(engine, body, on_output=seen.append)
    assert used_after == 0
    aborted = [o for o in seen if o.request_id == "gone" and o.finished]
    assert len(aborted) == 1 and aborted[0].finish_reason == "abort"
    assert aborted[0].completion_tokens < 200
    assert other_tokens == expected_other  # the other request was unaffected
    assert_idle(engine)


@pytest.mark.parametrize("chunk", [4, 8])
def test_batched_decode_of_varied_lengths_equals_alone(tiny_llama: LoadedModel, chunk: int) -> None:
    prompts = [tokens(n, seed=500 + n) for n in (2, 5, 9, 17, 30)]
    params = SamplingParams(max_tokens=12, ignore_eos=True)
    expected = alone(tiny_llama, prompts, params)
    engine = make(tiny_llama, prefill_chunk_size=chunk)
    ids = [engine.add_request(engine.request(p, params)) for p in prompts]
    got: dict[str, list[int]] = {rid: [] for rid in ids}
    widest = 0
    while engine.has_unfinished():
        outs = engine.step()
        widest = max(widest, sum(1 for o in outs if o.new_token_ids))
        for out in outs:
            got[out.request_id].extend(out.new_token_ids)
    assert widest == len(prompts)  # at least one step decoded all of them in one batch
    assert [got[rid] for rid in ids] == expected
    assert_idle(engine)


def test_engine_thread_runs_with_the_configured_torch_threads(
    tiny_llama: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CACHEGATE_ENGINE_THREADS -> EngineConfig.num_threads: the step thread's own count;
    # the control (None) keeps torch's default, so the check can tell them apart
    assert torch.get_num_threads() > 1 or pytest.skip("a single-core machine")
    seen: dict[str | None, set[int]] = {}
    step = PrefixEngine.step

    def spy(self: PrefixEngine) -> list[RequestOutput]:
        seen.setdefault(str(self.config.num_threads), set()).add(torch.get_num_threads())
        return step(self)

    monkeypatch.setattr(PrefixEngine, "step", spy)
    params = SamplingParams(max_tokens=3, ignore_eos=True)
    default = torch.get_num_threads()
    # threads started later inherit the last count set anywhere (another test's worker
    # thread may have set 1): set it here, so the control's thread starts with `default`
    torch.set_num_threads(default)

    async def body(ae: AsyncEngine) -> Any:
        return await run_one(ae, tokens(6, seed=3), params)

    try:
        for threads in (None, 1):
            got, _ = with_async_engine(make(tiny_llama, num_threads=threads), body)
            assert len(got) == 3
    finally:
        torch.set_num_threads(default)  # threads started later inherit the last count set
    assert seen["1"] == {1}
    assert seen["None"] == {default}
    with pytest.raises(ValueError, match="num_threads"):
        EngineConfig(num_threads=0)


def test_outputs_for_a_closed_event_loop_do_not_stop_the_engine(tiny_llama: LoadedModel) -> None:
    # A stream whose event loop has gone (its server shut down mid-request): the
    # engine thread drops those outputs and keeps serving the requests of other loops.
    engine = make(tiny_llama)
    ae = AsyncEngine(engine)
    ae.start()
    params = SamplingParams(max_tokens=40, ignore_eos=True)
    try:

        async def submit_and_leave() -> None:
            await ae.submit(engine.request(tokens(6, seed=900), params))  # never read

        asyncio.run(submit_and_leave())  # closes that loop with the request running
        deadline = time.monotonic() + 30
        # The add may still sit in the inbox (the engine thread hands it over a moment
        # later: has_unfinished() was False then, and the request ran on past the test,
        # a flake before session 39); _queued_adds drops only after the hand-over.
        while (ae._queued_adds or engine.has_unfinished()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ae.is_alive and ae.error is None
        prompt = tokens(7, seed=901)
        expected = alone(tiny_llama, [prompt], SamplingParams(max_tokens=5, ignore_eos=True))

        async def positive_control() -> list[int]:
            got, _ = await run_one(ae, prompt, SamplingParams(max_tokens=5, ignore_eos=True))
            return got

        assert asyncio.run(positive_control()) == expected[0]
    finally:
        ae.shutdown()
    assert_idle(engine)
