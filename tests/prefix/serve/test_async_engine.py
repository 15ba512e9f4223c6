"""AsyncEngine's bookkeeping between the event loop and the engine thread.

The waiting bound (``max_num_waiting``, a 429 ``queue_full``) counts requests not yet
admitted, never finished ones whose reader is slow; a submit racing the engine
thread's death raises instead of leaving a reader waiting forever; a request the
engine thread cannot queue fails alone, not as a dead engine.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from prefix.config import EngineConfig
from prefix.core.request import EngineRequest
from prefix.core.sequence import Sequence
from prefix.errors import EngineDeadError, QueueFullError, RequestError, StepFailedError
from prefix.model.loader import LoadedModel
from prefix.model.sampling import SamplingParams
from prefix.serve.async_engine import AsyncEngine, OutputStream
from prefix.serve.engine import PrefixEngine, RequestOutput
from prefix.serve.openai_adapter import engine_error

T = TypeVar("T")
TIMEOUT = 10.0  # no test here takes a second; a hang fails instead of stalling the run


def make(loaded: LoadedModel, **kw: Any) -> PrefixEngine:
    return PrefixEngine(EngineConfig(**({"block_size": 4, "num_blocks": 64} | kw)), loaded=loaded)


def req(engine: PrefixEngine, i: int, max_tokens: int = 2) -> EngineRequest:
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    return engine.request([3 + i + k for k in range(8)], params, request_id=f"r{i}")


async def drain(stream: OutputStream) -> None:
    try:
        async for _ in stream:
            pass
    finally:
        await stream.aclose()


def run(
    engine: PrefixEngine,
    body: Callable[[AsyncEngine], Awaitable[T]],
    on_output: Callable[[RequestOutput], None] | None = None,
) -> T:
    async def main() -> T:
        ae = AsyncEngine(engine, on_output)
        ae.start()
        try:
            return await asyncio.wait_for(body(ae), TIMEOUT)
        finally:
            await asyncio.to_thread(ae.shutdown)

    return asyncio.run(main())


async def until(pred: Callable[[], bool]) -> None:
    while not pred():
        await asyncio.sleep(0.005)


class StepGate:
    """After each step the engine thread waits for the test (``entered`` is released,
    then it waits for ``allowed``), until :meth:`open`."""

    def __init__(self, engine: PrefixEngine) -> None:
        self.entered, self.allowed = threading.Semaphore(0), threading.Semaphore(0)
        self.gated = True
        real_step = engine.step

        def step() -> Any:
            outputs = real_step()
            if self.gated:
                self.entered.release()
                self.allowed.acquire()
            return outputs

        engine.step = step  # type: ignore[method-assign]

    def open(self) -> None:
        self.gated = False
        self.allowed.release()


def test_finished_streams_left_unread_do_not_fill_the_waiting_queue(
    tiny_llama: LoadedModel,
) -> None:
    engine = make(tiny_llama, max_num_waiting=2)
    finished: list[str] = []  # appended in the engine thread as requests finish

    def on_output(out: RequestOutput) -> None:
        if out.finished:
            finished.append(out.request_id)

    async def body(ae: AsyncEngine) -> None:
        # Two readers that have not read yet (slow SSE clients): their requests finish.
        unread = [await ae.submit(req(engine, i)) for i in range(2)]
        await until(lambda: len(finished) == 2)
        assert not engine.has_unfinished()
        third = await ae.submit(req(engine, 2))  # the engine is idle: nothing waits
        await drain(third)
        for stream in unread:
            await drain(stream)

    run(engine, body, on_output)
    assert engine.pool.num_used_blocks == 0


def test_requests_really_waiting_still_fill_the_queue(tiny_llama: LoadedModel) -> None:
    """The control: queued in the inbox, then in the scheduler, two requests are waiting."""
    engine = make(tiny_llama, max_num_waiting=2, max_num_seqs=1)
    gate = StepGate(engine)

    async def body(ae: AsyncEngine) -> tuple[QueueFullError, QueueFullError, int]:
        running = await ae.submit(req(engine, 0, max_tokens=8))
        try:
            await asyncio.to_thread(gate.entered.acquire)  # admitted; the thread holds
            queued = [await ae.submit(req(engine, i)) for i in (1, 2)]
            with pytest.raises(QueueFullError) as in_inbox:  # both still in the inbox
                await ae.submit(req(engine, 3))
            gate.allowed.release()  # the inbox goes to the scheduler, which has no room
            await asyncio.to_thread(gate.entered.acquire)
            waiting = engine.num_waiting
            with pytest.raises(QueueFullError) as in_scheduler:
                await ae.submit(req(engine, 4))
        finally:
            gate.open()
        for stream in [running, *queued]:
            await drain(stream)
        return in_inbox.value, in_scheduler.value, waiting

    in_inbox, in_scheduler, waiting = run(engine, body)
    assert waiting == 2
    for err in (in_inbox, in_scheduler):
        api = engine_error(err)
        assert (api.status, api.code) == (429, "queue_full")
        assert api.headers == {"Retry-After": "1"}
    assert engine.pool.num_used_blocks == 0


def test_submit_racing_the_engine_thread_death_raises_instead_of_hanging(
    tiny_llama: LoadedModel,
) -> None:
    engine = make(tiny_llama)
    real_new_sequence = engine.new_sequence

    async def body(ae: AsyncEngine) -> EngineDeadError:
        def boom() -> bool:
            raise RuntimeError("device lost")

        def new_sequence(r: EngineRequest) -> Sequence:
            # submit() checked is_alive before this; the thread dies while it validates
            seq = real_new_sequence(r)
            engine.has_unfinished = boom  # type: ignore[method-assign]
            ae._wake.set()
            assert ae._thread is not None
            ae._thread.join(TIMEOUT)
            return seq

        engine.new_sequence = new_sequence  # type: ignore[method-assign, assignment]
        with pytest.raises(EngineDeadError) as dead:
            # a stream registered after the thread's error fan-out would wait forever
            async with asyncio.timeout(3):
                await drain(await ae.submit(req(engine, 0)))
        return dead.value

    err = run(engine, body)
    assert not isinstance(err, StepFailedError)  # the engine really is dead
    assert engine_error(err).code == "engine_dead"


@pytest.mark.parametrize(
    ("raised", "expected", "status"),
    [
        (RuntimeError("a bug queueing it"), StepFailedError, 500),
        (RequestError("this request cannot run"), RequestError, 400),
    ],
)
def test_a_request_the_engine_thread_cannot_queue_fails_alone(
    tiny_llama: LoadedModel, raised: Exception, expected: type[Exception], status: int
) -> None:
    engine = make(tiny_llama)
    real_add = engine.add_sequence
    failures = [raised]

    def add_sequence(seq: Sequence, params: SamplingParams) -> None:
        if failures:
            raise failures.pop()
        real_add(seq, params)

    engine.add_sequence = add_sequence  # type: ignore[method-assign]

    async def body(ae: AsyncEngine) -> tuple[Exception, bool]:
        with pytest.raises(Exception) as failed:
            await drain(await ae.submit(req(engine, 0)))
        alive = ae.is_alive
        await drain(await ae.submit(req(engine, 1)))  # the engine serves on
        return failed.value, alive

    err, alive = run(engine, body)
    assert type(err) is expected  # not EngineDeadError: a 503 engine_dead would be a lie
    assert engine_error(err).status == status
    assert alive
    assert engine.pool.num_used_blocks == 0 and not engine.has_unfinished()


def test_a_shutdown_ends_the_streams_still_open(tiny_llama: LoadedModel) -> None:
    # A reader waiting when the engine is shut down (or a submit under way then) gets
    # EngineDeadError instead of waiting forever.
    engine = make(tiny_llama)
    real_new_sequence = engine.new_sequence

    async def body(ae: AsyncEngine) -> None:
        waiting = await ae.submit(req(engine, 0, max_tokens=1))
        await drain(waiting)  # positive control: served while the engine runs
        gate = threading.Event()

        def new_sequence(r: EngineRequest) -> Sequence:
            seq = real_new_sequence(r)
            gate.wait(TIMEOUT)  # the engine is shut down meanwhile
            return seq

        engine.new_sequence = new_sequence  # type: ignore[method-assign, assignment]
        late = asyncio.ensure_future(ae.submit(req(engine, 1)))
        await asyncio.sleep(0.1)
        await asyncio.to_thread(ae.shutdown, TIMEOUT)
        gate.set()
        with pytest.raises(EngineDeadError):
            async with asyncio.timeout(3):
                await drain(await late)

    run(engine, body)


def stream_seq(ae: AsyncEngine, request_id: str) -> Sequence:
    seq = ae._streams[request_id].share.seq
    assert seq is not None
    return seq


def test_one_tenant_fills_only_its_share_of_the_waiting_queue(tiny_llama: LoadedModel) -> None:
    """Tenant A floods the queue: past its share (3 of 4) only A is refused; B, and
    anonymous requests, still get in. Every share is given back as requests start."""
    engine = make(tiny_llama, max_num_waiting=4, max_num_seqs=1)
    gate = StepGate(engine)

    def of(tenant: str, i: int) -> EngineRequest:
        params = SamplingParams(max_tokens=2, ignore_eos=True)
        return engine.request([3 + i, 4, 5, 6, 7], params, namespace=tenant, request_id=f"q{i}")

    async def body(ae: AsyncEngine) -> tuple[QueueFullError, QueueFullError, dict[str, int]]:
        running = await ae.submit(req(engine, 0, max_tokens=8))
        streams = [running]
        try:
            await asyncio.to_thread(gate.entered.acquire)  # admitted; the thread holds
            streams += [await ae.submit(of("tenant-a", i)) for i in (1, 2, 3)]
            with pytest.raises(QueueFullError) as share:  # A's fourth: past its share
                await ae.submit(of("tenant-a", 4))
            streams.append(await ae.submit(of("tenant-b", 5)))  # B is not refused
            with pytest.raises(QueueFullError) as full:  # now the whole queue is full
                await ae.submit(of("tenant-c", 6))
        finally:
            gate.open()
        for stream in streams:
            await drain(stream)
        left = ae.waiting_share.by_tenant()
        streams = [await ae.submit(of("tenant-a", i)) for i in (7, 8, 9)]  # A again
        for stream in streams:
            await drain(stream)
        return share.value, full.value, left

    share, full, left = run(engine, body)
    assert "share" in str(share) and "tenant-a" not in str(share)
    assert "share" not in str(full)
    assert engine_error(share).status == 429 and engine_error(share).code == "queue_full"
    assert left == {}  # every share given back
    assert engine.pool.num_used_blocks == 0


def test_a_refused_or_failed_submit_gives_its_share_back(tiny_llama: LoadedModel) -> None:
    engine = make(tiny_llama, max_num_waiting=2)  # a share of 1

    async def body(ae: AsyncEngine) -> dict[str, int]:
        too_long = engine.request([3 + i % 100 for i in range(100_000)], namespace="tenant-a")
        for _ in range(3):  # the prompt can never run: a RequestError, not a 429
            with pytest.raises(RequestError):
                await ae.submit(too_long)
        stream = await ae.submit(engine.request([3, 4, 5], namespace="tenant-a"))
        await drain(stream)
        return ae.waiting_share.by_tenant()

    assert run(engine, body) == {}


def test_a_request_in_its_prefill_no_longer_holds_its_tenants_share(
    tiny_llama: LoadedModel,
) -> None:
    """A long prompt is prefilled over several steps with no output meanwhile: once the
    scheduler admitted it, it is no longer waiting, so its tenant's share is free again
    (it counted until its first output, so a tenant of long prompts was refused early)."""
    engine = make(
        tiny_llama,
        max_num_waiting=4,
        prefill_chunk_size=4,
        max_num_batched_tokens=4,
        max_num_seqs=4,
    )
    gate = StepGate(engine)
    params = SamplingParams(max_tokens=2, ignore_eos=True)
    long = engine.request(list(range(3, 19)), params, namespace="tenant-a", request_id="long")

    async def body(ae: AsyncEngine) -> tuple[dict[str, int], dict[str, int], bool]:
        stream = await ae.submit(long)
        before = ae.waiting_share.by_tenant()  # submitted, not yet admitted: waiting
        try:
            await asyncio.to_thread(gate.entered.acquire)  # step 1: the first chunk
            gate.allowed.release()
            await asyncio.to_thread(gate.entered.acquire)  # step 2, still prefilling
            during = ae.waiting_share.by_tenant()
            seq = stream_seq(ae, "long")
            prefilling = (
                seq.num_computed_tokens < seq.num_prompt_tokens and not seq.output_token_ids
            )
        finally:
            gate.open()
        await drain(stream)
        return before, during, prefilling

    before, during, prefilling = run(engine, body)
    assert before == {"tenant-a": 1}  # control: a request not yet admitted counts
    assert prefilling  # the check ran inside the prefill, before any output
    assert during == {}  # admitted: its share is back


def test_a_request_preempted_in_its_prefill_takes_its_share_again(
    tiny_llama: LoadedModel,
) -> None:
    """KV runs short while tenant B's long prompt is prefilled: the scheduler preempts it
    back to its queue, and it holds B's share again until it is admitted once more."""
    engine = make(
        tiny_llama,
        num_blocks=6,
        prefill_chunk_size=4,
        max_num_batched_tokens=5,
        max_num_seqs=2,
    )
    gate = StepGate(engine)
    params = SamplingParams(max_tokens=16, ignore_eos=True)
    first = engine.request(list(range(3, 7)), params, namespace="tenant-x", request_id="a")
    params_b = SamplingParams(max_tokens=2, ignore_eos=True)
    long = engine.request(list(range(20, 40)), params_b, namespace="tenant-b", request_id="b")

    async def body(ae: AsyncEngine) -> list[tuple[str, int]]:
        seen: list[tuple[str, int]] = []  # (B's status, B's waiting count) at each gate
        streams = [await ae.submit(first)]
        try:
            await asyncio.to_thread(gate.entered.acquire)
            streams.append(await ae.submit(long))
            for _ in range(60):
                gate.allowed.release()
                await asyncio.to_thread(gate.entered.acquire)
                seq = stream_seq(ae, "b")
                if seq.output_token_ids:
                    break
                count = ae.waiting_share.by_tenant().get("tenant-b", 0)
                seen.append((seq.status.value, count))
        finally:
            gate.open()
        for stream in streams:
            await drain(stream)
        return seen

    seen = run(engine, body)
    # At each gate the step has run and the bookkeeping of the step before it: B is
    # admitted (its share goes after that step), preempted in the next one (the share
    # was already given back), counted again while it waits, then admitted once more.
    assert seen[0] == ("running", 1), seen
    preempted = seen.index(("waiting", 0))
    assert seen[preempted + 1] == ("waiting", 1), seen
    assert seen[-1] == ("running", 0), seen
    assert engine.scheduler.num_preemptions >= 1
