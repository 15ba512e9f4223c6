"""Asynchronous front of the engine: the model runs in its own thread.

``submit()`` validates an :class:`EngineRequest` (in a worker thread, so the event
loop never blocks) and queues it; it returns an :class:`OutputStream` of
``RequestOutput`` deltas. A request that can never run raises its RequestError from
``submit()``, before any response starts. Scheduling and the model run in the
engine thread. Closing the stream early (the client went away) aborts the request
and frees its blocks at once. ``generate()`` is the same as one async generator.
A step that fails ends the requests in it: their streams raise ``StepFailedError``
(prefix/serve/recovery.py); only failures that persist stop the engine thread, and
then every stream raises ``EngineDeadError``, as does every later ``submit()``.

``max_num_waiting`` bounds the requests not yet admitted (queued here for the engine
thread, or waiting in its scheduler); beyond it ``submit()`` raises ``QueueFullError``
(a 429 ``queue_full`` with ``Retry-After``). A finished request whose reader has not
drained its stream yet (a slow client) is not waiting and does not count. One
tenant's requests not yet admitted (a request preempted back to the scheduler's
queue counts again) may fill at most its share of the queue
(``max_num_waiting_per_tenant``, by default three quarters): beyond it only that
tenant gets ``QueueFullError``, and the others still get in (the bookkeeping is
prefix/serve/waiting_share.py).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field

import torch

from prefix.core.request import EngineRequest
from prefix.core.sequence import Sequence
from prefix.errors import (
    EngineDeadError,
    PrefixError,
    QueueFullError,
    RequestError,
    StepFailedError,
)
from prefix.serve.engine import PrefixEngine, RequestOutput
from prefix.serve.prep_pool import in_prep_thread
from prefix.serve.threads import engine_thread_count
from prefix.serve.waiting_share import ShareEntry, WaitingShare
from protocol.sampling import SamplingParams

__all__ = ["AsyncEngine", "EngineDeadError", "OutputStream", "StepFailedError"]

log = logging.getLogger("cachegate.prefix")


@dataclass
class _Failed:
    """This request alone failed (its step, or queueing it); the engine lives on, so the
    reader raises ``error`` itself and not ``EngineDeadError``."""

    error: PrefixError


# An output, a per-request error, or the error that stopped the engine thread.
_Item = RequestOutput | _Failed | BaseException


@dataclass
class _Stream:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[_Item]
    share: ShareEntry = field(default_factory=ShareEntry)


class AsyncEngine:
    def __init__(
        self,
        engine: PrefixEngine,
        on_output: Callable[[RequestOutput], None] | None = None,
    ) -> None:
        self.engine = engine
        self.on_output = on_output  # metrics hook, called in the engine thread
        self._inbox: queue.SimpleQueue[tuple[str, object]] = queue.SimpleQueue()
        self._streams: dict[str, _Stream] = {}
        self._streams_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.steps = 0
        self._submitting = 0  # submit() calls between the queue check and registration
        # Under _streams_lock: adds put in the inbox that the engine thread has not yet
        # handed to the scheduler (they are waiting too, but engine.num_waiting misses them).
        self._queued_adds = 0
        # Under _streams_lock: set by the dying engine thread as it fans its error out
        # to the streams; a stream registered after that would never hear of it.
        self._dead = False
        # Under _streams_lock: each tenant's share of the waiting queue in use.
        self.waiting_share = WaitingShare(engine.config.waiting_per_tenant)

    # ---- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="engine", daemon=True)
            self._thread.start()

    def shutdown(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        # Blocks queued for the disk/Redis tiers are what a restarted engine will reuse.
        self.engine.flush_tiers(timeout)

    @property
    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self.error is None

    # ---- requests -------------------------------------------------------------------
    async def submit(self, req: EngineRequest) -> OutputStream:
        """Validate and queue one request; raises its RequestError before anything starts."""
        if not self.is_alive:
            raise EngineDeadError(dead_message(self.error))
        # Waiting means not yet admitted: in the scheduler's queue, or still in the inbox;
        # submissions being validated count too, or a burst would all get in. Registered
        # streams are no measure: one stays until its reader closes it, long after its
        # request finished when the client reads slowly. (_queued_adds is read without
        # the lock: one int, and a stale value errs by the add being drained right now.)
        config = self.engine.config
        waiting = self.engine.num_waiting + self._queued_adds + self._submitting
        if waiting >= config.max_num_waiting:
            raise QueueFullError(
                f"{waiting} requests are waiting for the engine (the limit is "
                f"{config.max_num_waiting}); retry later"
            )
        stream = _Stream(asyncio.get_running_loop(), asyncio.Queue(), ShareEntry(req.tenant_key))
        with self._streams_lock:
            if not self.waiting_share.can_reserve(stream.share.tenant):
                # The tenant is not named: the message goes to that tenant's client.
                raise QueueFullError(
                    f"this tenant has {config.waiting_per_tenant} requests waiting for "
                    "the engine, its share of the queue; retry later"
                )
            self.waiting_share.reserve(stream.share)  # before validation
        self._submitting += 1
        registered = False
        try:
            seq = await in_prep_thread(self.engine.new_sequence, req)
            with self._streams_lock:
                # The thread may have died while new_sequence ran; checked under the lock
                # its error fan-out takes, so either that fan-out sees this stream or we
                # see _dead.
                if self._dead:
                    raise EngineDeadError(dead_message(self.error))
                if seq.request_id in self._streams:
                    raise ValueError(f"duplicate request id {seq.request_id!r}")
                self._streams[seq.request_id] = stream
                self.waiting_share.register(stream.share, seq)
                self._queued_adds += 1
                self._inbox.put(("add", (seq, req.params)))
                registered = True
        finally:
            self._submitting -= 1
            if not registered:
                with self._streams_lock:
                    self.waiting_share.release(stream.share)
        self._wake.set()
        return OutputStream(self, seq.request_id, seq.root, stream)

    async def generate(self, req: EngineRequest) -> AsyncGenerator[RequestOutput, None]:
        """Stream one request's outputs; raises RequestError before the first yield."""
        outputs = await self.submit(req)
        try:
            async for out in outputs:
                yield out
        finally:
            await outputs.aclose()

    def _forget(self, request_id: str) -> None:
        with self._streams_lock:
            stream = self._streams.pop(request_id, None)
            if stream is not None:
                self.waiting_share.release(stream.share)

    def abort(self, request_id: str) -> None:
        self._inbox.put(("abort", request_id))
        self._wake.set()

    # ---- the engine thread ----------------------------------------------------------
    def _loop(self) -> None:
        try:
            threads = engine_thread_count(self.engine.config.num_threads)
            if threads is not None:
                # per thread with OpenMP: this sets the step thread's own parallel regions
                # (prefix/serve/threads.py: a server reserves the main thread's count here)
                torch.set_num_threads(threads)
            while not self._stop.is_set():
                self._drain_inbox()
                if self.engine.has_unfinished():
                    self._dispatch_all(self.engine.step())
                    with self._streams_lock:
                        self.waiting_share.after_step()
                    self.steps += 1
                else:
                    self._wake.wait(0.05)
                    self._wake.clear()
        except BaseException as exc:
            self.error = exc
            log.exception("engine thread died")
            self._end_streams(exc)
        else:  # shut down: a reader still waiting (or a submit under way) must not hang
            self._end_streams(EngineDeadError("the engine was shut down"))

    def _end_streams(self, exc: BaseException) -> None:
        """Send ``exc`` to every open stream; none registers afterwards."""
        with self._streams_lock:
            self._dead = True  # no stream registers after this: submit() checks it
            streams = list(self._streams.values())
            for s in streams:
                self.waiting_share.release(s.share)
        for s in streams:
            try:
                s.loop.call_soon_threadsafe(s.queue.put_nowait, exc)
            except RuntimeError:  # that loop closed: no reader left, tell the others
                log.debug("event loop closed; the engine's error not delivered there")

    def _drain_inbox(self) -> None:
        while True:
            try:
                kind, payload = self._inbox.get_nowait()
            except queue.Empty:
                return
            if kind == "add":
                assert isinstance(payload, tuple)
                seq: Sequence = payload[0]
                params: SamplingParams = payload[1]
                try:
                    self.engine.add_sequence(seq, params)
                except Exception as exc:  # one bad request must not stop the engine
                    log.exception("could not add request %s", seq.request_id)
                    self._fail(seq.request_id, _request_failed(exc))
                finally:
                    # After add_sequence: for a moment it counts twice (in the scheduler
                    # and here), never zero times, so the bound is never overshot.
                    with self._streams_lock:
                        self._queued_adds -= 1
            elif kind == "abort":
                out = self.engine.abort(str(payload))
                if out is not None:
                    self._dispatch_all([out])

    def _fail(self, request_id: str, item: _Failed) -> None:
        with self._streams_lock:
            stream = self._streams.get(request_id)
            if stream is not None:
                self.waiting_share.release(stream.share)
        if stream is not None:
            try:
                stream.loop.call_soon_threadsafe(stream.queue.put_nowait, item)
            except RuntimeError:  # that loop closed (its server shut down): no reader left
                log.debug("event loop closed; the error for %s dropped", request_id)

    def _dispatch_all(self, outputs: list[RequestOutput]) -> None:
        """Hand a step's outputs to their streams: one wake-up per event loop per step.

        A step of 32 decoding sequences yields 32 outputs; one ``call_soon_threadsafe``
        per loop instead of one per output writes the loop's wake-up pipe once. (Measured
        in-process with 32 streams: steps run 6-19% slower beside an event loop than
        stepped synchronously, with or without this; the loop's share of the two cores
        and of the GIL is what that costs, not the number of wake-ups.) A loop that has
        closed (its server shut down) has no reader left: its outputs are dropped
        instead of stopping the engine thread.
        """
        if not outputs:
            return
        if self.on_output is not None:
            for out in outputs:
                try:
                    self.on_output(out)
                except Exception:  # metrics must never take the engine down
                    log.exception("on_output hook failed")
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Stream, _Item]]] = {}
        with self._streams_lock:
            for out in outputs:
                stream = self._streams.get(out.request_id)
                if stream is not None:
                    self.waiting_share.release(stream.share)
                    by_loop.setdefault(stream.loop, []).append((stream, _item(out)))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, items)
            except RuntimeError:  # that loop closed (its server shut down): no reader left
                log.debug("event loop closed; %d outputs dropped", len(items))


def _item(out: RequestOutput) -> _Item:
    """What the stream gets: the output, or for a request its failed step ended
    (prefix/serve/recovery.py) the error its reader raises instead."""
    if out.finish_reason == "error":
        return _Failed(StepFailedError("the engine step computing this request failed; retry it"))
    return out


def _request_failed(exc: Exception) -> _Failed:
    """The error for a request the engine thread could not queue: the request's own
    RequestError (a 400), else a StepFailedError (a 500 a retry may get past), never
    EngineDeadError: the engine goes on serving the others."""
    if isinstance(exc, RequestError):
        return _Failed(exc)
    err = StepFailedError(f"the engine could not queue this request ({exc!r}); retry it")
    err.__cause__ = exc
    return _Failed(err)


def _deliver(items: list[tuple[_Stream, _Item]]) -> None:
    """Runs in the streams' event loop."""
    for stream, out in items:
        stream.queue.put_nowait(out)


class OutputStream:
    """The outputs of one submitted request, ending with the finished one.

    ``aclose()`` must be called (callers do it in ``finally``): it aborts the request
    unless it finished, so a client that left frees its blocks at once.
    """

    def __init__(self, owner: AsyncEngine, request_id: str, root: bytes, stream: _Stream) -> None:
        self.owner = owner
        self.request_id = request_id
        self.root = root  # the chain root the request runs under (for digests in logs)
        self._stream = stream
        self._finished = False
        self._closed = False

    def __aiter__(self) -> OutputStream:
        return self

    async def __anext__(self) -> RequestOutput:
        if self._finished or self._closed:
            raise StopAsyncIteration
        item = await self._stream.queue.get()
        if isinstance(item, _Failed):
            self._finished = True  # the engine already ended it: nothing to abort
            raise item.error
        if isinstance(item, BaseException):
            raise EngineDeadError("the engine failed while serving this request") from item
        self._finished = item.finished
        return item

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._finished:
            self.owner.abort(self.request_id)
        self.owner._forget(self.request_id)


def dead_message(error: BaseException | None) -> str:
    """Why the engine is not running, for clients: the exception's type only. Its text
    is for the engine's log (written when the thread stopped): it may hold anything,
    down to a piece of a prompt."""
    cause = "" if error is None else f" ({type(error).__name__}; see the engine's log)"
    return f"the engine is not running{cause}"
