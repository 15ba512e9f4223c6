"""A failing engine step ends its own requests, not the engine (prefix/serve/recovery.py).

Faults are injected into the model runner on the tiny random Llama: the forward runs,
then the positions it computed are overwritten with garbage (a step that died half
way through), then it raises. The requests of that step must end with a typed error
and never hang, their blocks must go back to the pool, the garbage must never be
served as a cached prefix, and later requests must run exactly as on a fresh engine.
Only failures that persist stop the engine (readiness false).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest
import torch

from prefix.config import EngineConfig
from prefix.errors import EngineDeadError, StepFailedError
from prefix.model.loader import LoadedModel
from prefix.model.sampling import SamplingParams
from prefix.serve.async_engine import AsyncEngine
from prefix.serve.engine import PrefixEngine, RequestOutput
from prefix.serve.metrics import EngineMetrics
from prefix.serve.openai_adapter import engine_error
from prefix.serve.recovery import MAX_CONSECUTIVE_STEP_FAILURES
from prefix.serve.server import create_engine_app
from tests.prefix.server_support import COMP, assert_openai_error, sse_payloads

B = 4  # block size
PARAMS = SamplingParams(max_tokens=4, ignore_eos=True)


class InjectedFault(RuntimeError):
    pass


def tokens(n: int, seed: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, 128, (n,), generator=gen).tolist()


def make(loaded: LoadedModel, **kw: Any) -> PrefixEngine:
    return PrefixEngine(EngineConfig(**({"block_size": B, "num_blocks": 32} | kw)), loaded=loaded)


def inject_fault(engine: PrefixEngine, kind: str, *, skip: int = 0, times: int = 1) -> list[int]:
    """Make calls ``skip+1 .. skip+times`` of ``runner.<kind>`` ("prefill" or "decode")
    write garbage K/V at the positions they ran and raise; returns the call log."""
    real = getattr(engine.runner, kind)
    calls: list[int] = []

    def faulty(arg: Any) -> torch.Tensor:
        calls.append(len(calls) + 1)
        logits = real(arg)
        if not skip < len(calls) <= skip + times:
            return logits
        if kind == "prefill":
            slots = [seq.slot(p) for seq, start, end in arg for p in range(start, end)]
        else:
            slots = [seq.slot(seq.num_tokens - 1) for seq in arg]
        kv = engine.kv_cache.kv
        flat = kv.view(kv.shape[0], 2, -1, *kv.shape[4:])  # [layers, 2, slots, heads, dim]
        with torch.no_grad():
            flat[:, :, slots] = 50.0
        raise InjectedFault(f"injected fault in {kind} call {len(calls)}")

    setattr(engine.runner, kind, faulty)
    return calls


def run_all(engine: PrefixEngine) -> dict[str, list[RequestOutput]]:
    got: dict[str, list[RequestOutput]] = {}
    while engine.has_unfinished():
        for out in engine.step():
            got.setdefault(out.request_id, []).append(out)
    return got


def assert_idle(engine: PrefixEngine) -> None:
    engine.pool.check_integrity()
    assert engine.pool.num_used_blocks == 0
    assert not engine.has_unfinished()


def test_failed_prefill_chunk_ends_its_request_and_caches_no_garbage(
    tiny_llama: LoadedModel,
) -> None:
    # chunks of 8 tokens: the 14-token prompt prefills [0, 8) (blocks 0-1 committed),
    # then [8, 14) fails half-computed; one running sequence, so `other` waits meanwhile
    engine = make(tiny_llama, prefill_chunk_size=8, max_num_seqs=1)
    plain = make(tiny_llama, enable_prefix_caching=False)
    prompt, other = tokens(14, seed=1), tokens(9, seed=2)
    inject_fault(engine, "prefill", skip=1)
    failing = engine.add_request(engine.request(prompt, PARAMS))
    waiting = engine.add_request(engine.request(other, PARAMS))

    assert engine.step() == []  # the first chunk: no token yet
    [ended] = engine.step()
    assert (ended.request_id, ended.finished, ended.finish_reason) == (failing, True, "error")
    assert ended.new_token_ids == []
    engine.pool.check_integrity()
    assert engine.pool.num_used_blocks == 0  # its blocks are back; `other` still waits
    assert engine.pool.num_cached_blocks == 2  # only the blocks of the completed chunk
    assert engine.step_failures.total == engine.step_failures.consecutive == 1

    outs = run_all(engine)  # the request outside the failed step runs as if nothing happened
    assert [t for o in outs[waiting] for t in o.new_token_ids] == plain.generate(
        other, PARAMS
    ).token_ids
    assert outs[waiting][-1].finish_reason == "length"
    assert engine.step_failures.consecutive == 0
    assert_idle(engine)

    # the same prompt again: the completed chunk's blocks are reused, the garbage is not
    logits, cached = engine.prefill_logits(prompt)
    expected, _ = plain.prefill_logits(prompt)
    assert cached == 8
    torch.testing.assert_close(logits, expected, atol=1e-4, rtol=0)
    assert engine.generate(prompt, PARAMS).token_ids == plain.generate(prompt, PARAMS).token_ids
    assert_idle(engine)


def test_failed_decode_ends_every_request_of_the_batch(tiny_llama: LoadedModel) -> None:
    engine = make(tiny_llama)
    plain = make(tiny_llama, enable_prefix_caching=False)
    prompts = [tokens(7, seed=10), tokens(8, seed=11)]
    # the second decode: one token already out, garbage written after the prompts' blocks
    inject_fault(engine, "decode", skip=1)
    ids = [engine.add_request(engine.request(p, PARAMS)) for p in prompts]
    outs = run_all(engine)
    for rid in ids:
        assert [o.finish_reason for o in outs[rid]] == [None, None, "error"]
        assert sum(len(o.new_token_ids) for o in outs[rid]) == 2  # prefill's + 1st decode's
    assert_idle(engine)
    for prompt in prompts:  # later identical prompts reuse only exact blocks
        got = engine.generate(prompt, PARAMS)
        assert got.token_ids == plain.generate(prompt, PARAMS).token_ids
    inject_fault(engine, "decode")
    with pytest.raises(StepFailedError):  # the synchronous API raises it too
        engine.generate(prompts[0], PARAMS)
    assert_idle(engine)


async def collect(ae: AsyncEngine, prompt: list[int]) -> list[int]:
    got: list[int] = []
    async for out in ae.generate(ae.engine.request(prompt, PARAMS)):
        got.extend(out.new_token_ids)
    return got


def with_async_engine(engine: PrefixEngine, body: Any, on_output: Any = None) -> Any:
    async def main() -> Any:
        ae = AsyncEngine(engine, on_output=on_output)
        ae.start()
        try:
            # a stream that never ends would hang here: fail the test instead
            return await asyncio.wait_for(body(ae), timeout=30)
        finally:
            await asyncio.to_thread(ae.shutdown)

    return asyncio.run(main())


def test_stream_gets_a_typed_5xx_and_the_engine_serves_on(
    tiny_llama: LoadedModel, caplog: pytest.LogCaptureFixture
) -> None:
    engine = make(tiny_llama)
    metrics = EngineMetrics(engine)
    prompt = tokens(6, seed=20)
    expected = make(tiny_llama, enable_prefix_caching=False).generate(prompt, PARAMS).token_ids
    inject_fault(engine, "prefill")

    async def body(ae: AsyncEngine) -> tuple[BaseException, bool, list[int]]:
        with pytest.raises(StepFailedError) as failed:
            await collect(ae, prompt)
        alive = ae.is_alive
        return failed.value, alive, await collect(ae, prompt)

    with caplog.at_level(logging.ERROR, logger="cachegate.prefix"):
        err, alive_after_failure, later = with_async_engine(engine, body, metrics.observe)
    assert isinstance(err, EngineDeadError)  # what servers already answer with a 5xx
    api = engine_error(err)
    assert (api.status, api.type, api.code) == (500, "server_error", "engine_step_failed")
    assert alive_after_failure
    assert later == expected
    assert_idle(engine)
    [record] = [r for r in caplog.records if "engine step failed" in r.getMessage()]
    assert record.exc_info is not None and isinstance(record.exc_info[1], InjectedFault)
    text = metrics.render().decode()
    assert "prefix_engine_step_failures_total 1.0" in text
    assert 'prefix_requests_total{finish_reason="error"} 1.0' in text


def test_repeated_step_failures_stop_the_engine(tiny_llama: LoadedModel) -> None:
    engine = make(tiny_llama)
    inject_fault(engine, "prefill", times=1000)  # a fault that stays
    prompts = [tokens(5, seed=30 + i) for i in range(MAX_CONSECUTIVE_STEP_FAILURES)]

    async def body(ae: AsyncEngine) -> list[tuple[type[BaseException], bool]]:
        seen: list[tuple[type[BaseException], bool]] = []
        for prompt in prompts:  # one at a time: each fails a step of its own
            with pytest.raises(EngineDeadError) as failed:
                await collect(ae, prompt)
            seen.append((type(failed.value), ae.is_alive))
        with pytest.raises(EngineDeadError):
            await ae.submit(engine.request(prompts[0], PARAMS))
        return seen

    seen = with_async_engine(engine, body)
    last = len(prompts) - 1
    assert seen[:last] == [(StepFailedError, True)] * last  # recovered
    assert seen[last] == (EngineDeadError, False)  # gave up: readiness fails
    assert_idle(engine)  # even the last step's request was cleaned up before it stopped


def test_engine_server_answers_a_failed_step_with_500_and_stays_healthy(
    tiny_llama: LoadedModel,
) -> None:
    engine = make(tiny_llama)
    app = create_engine_app(engine, served_model_name="tiny")
    body = {"model": "tiny", "prompt": "t5 t6 t7", "max_tokens": 6, "ignore_eos": True}

    async def main() -> tuple[httpx.Response, str, httpx.Response, httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://engine") as c:
                inject_fault(engine, "prefill")  # before any byte: a plain 500
                failed = await c.post(COMP, json=body)
                inject_fault(engine, "decode", skip=2)  # mid-stream: an SSE error event
                streamed = (await c.post(COMP, json=body | {"stream": True})).text
                return failed, streamed, await c.get("/health"), await c.post(COMP, json=body)

    failed, streamed, health, later = asyncio.run(asyncio.wait_for(main(), timeout=30))
    assert assert_openai_error(failed, 500)["code"] == "engine_step_failed"
    payloads = sse_payloads(streamed)
    assert "choices" in payloads[0]  # tokens went out before the failure
    assert payloads[-1]["error"]["code"] == "engine_step_failed"
    assert health.status_code == 200  # still ready
    assert later.status_code == 200 and later.json()["usage"]["completion_tokens"] == 6
    assert_idle(engine)


# ----------------------------------------------------------- one request's own fault


def test_a_top_p_too_small_for_float32_is_greedy_not_a_failed_batch(
    tiny_llama: LoadedModel,
) -> None:
    # top_p=1e-300 passes validation (in (0, 1]) and rounds to 0.0 in float32: the
    # sampler kept no token, multinomial raised, and the whole batch failed with it;
    # three such requests stopped the engine. Now the top token always survives.
    engine = make(tiny_llama)
    good = SamplingParams(max_tokens=4, ignore_eos=True)
    tiny = SamplingParams(max_tokens=4, ignore_eos=True, temperature=1.0, top_p=1e-300, seed=1)
    for _ in range(MAX_CONSECUTIVE_STEP_FAILURES + 1):
        ids = [engine.add_request(engine.request(tokens(6, seed=s), p)) for s, p in
               ((50, good), (51, tiny))]  # fmt: skip
        got = run_all(engine)
        for rid in ids:
            assert got[rid][-1].finish_reason == "length", got[rid][-1]
        greedy = engine.generate(tokens(6, seed=51), good, namespace="control")
        assert [t for o in got[ids[1]] for t in o.new_token_ids] == greedy.token_ids
    assert engine.step_failures.total == 0
    assert_idle(engine)


def test_a_request_whose_sampling_fails_ends_alone(
    tiny_llama: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever else one request's sampler or stop strings raise, the batch's forward
    # succeeded: that request ends with "error", the others go on, and it is not a
    # failed step (so it can never count towards stopping the engine).
    engine = make(tiny_llama)
    sampled = SamplingParams(max_tokens=4, ignore_eos=True, temperature=1.0, seed=3)
    good_id = engine.add_request(engine.request(tokens(6, seed=60), PARAMS))
    bad_id = engine.add_request(engine.request(tokens(6, seed=61), sampled))
    sampler = engine._requests[bad_id].sampler

    def broken(logits: torch.Tensor) -> int:
        raise InjectedFault("sampler fault")

    monkeypatch.setattr(sampler, "sample", broken)
    got = run_all(engine)
    assert got[bad_id][-1].finish_reason == "error"
    assert got[good_id][-1].finish_reason == "length"  # positive control
    assert sum(len(o.new_token_ids) for o in got[good_id]) == 4
    assert engine.step_failures.total == 0
    assert_idle(engine)
