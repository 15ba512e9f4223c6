"""Concurrent verifications folded into one forward (mirrors semantic/embed_batcher.py).

Each lookup sends its candidate pairs (already tokenized and checked) in one
``score_rows`` call from a gateway worker thread. While one forward runs (torch
releases the GIL), requests arriving in other threads queue up; the next forward
takes all of them at once (up to ``max_rows`` pairs; a request is never split),
so N concurrent hits cost one batched forward instead of N forwards one after
another behind a lock. Nothing ever waits for company: a request that finds the
verifier idle is scored at once, alone, so a quiet server pays no latency.

One thread at a time is the *leader*: it runs forwards over the queue until its
own request is done, then hands the role to the oldest waiting request's thread
(or leaves the verifier idle), so no caller serves others indefinitely.

Unlike the embedder's batcher, a failed forward is not retried request by
request: the rows were checked before they were queued (length, unknown
tokens), so a failing forward is the model failing, not one caller's input, and
retrying would multiply the cost of a broken model on a loaded server. Every
request in that forward gets the error, which the semantic cache turns into
``verifier_error``: a miss, never a hit (fail closed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

#: One pair as the model reads it: (input_ids, token_type_ids), unpadded.
Row = tuple[Sequence[int], Sequence[int]]
#: Scores a list of rows in one forward: one logit per row.
Forward = Callable[[list[Row]], list[float]]

#: Most pairs in one forward: 32 short pairs pad cheaply, and a bigger batch only
#: makes the requests at its end wait longer.
DEFAULT_MAX_ROWS = 32


class _Request:
    __slots__ = ("error", "ready", "rows", "scores")

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        self.scores: list[float] | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()  # set when done, or when promoted to leader

    @property
    def done(self) -> bool:
        return self.scores is not None or self.error is not None


class VerifyBatcher:
    """``score_rows(rows)`` from any thread; concurrent calls share forwards."""

    def __init__(self, forward: Forward, max_rows: int = DEFAULT_MAX_ROWS) -> None:
        if max_rows < 1:
            raise ValueError("max_rows must be >= 1")
        self.forward = forward
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._queue: list[_Request] = []
        self._busy = False  # a leader is running forwards
        self.forwards = 0  # forwards run
        self.requests = 0  # requests scored through them
        self.rows = 0  # pairs scored through them

    def score_rows(self, rows: list[Row]) -> list[float]:
        """One logit per row; raises what ``forward`` raised for the batch it was in."""
        if not rows:
            return []
        request = _Request(rows)
        with self._lock:
            self._queue.append(request)
            lead = not self._busy
            self._busy = True
        if not lead:
            request.ready.wait()
        if not request.done:  # idle verifier, or promoted by the previous leader
            self._lead(request)
        if request.error is not None:
            raise request.error
        assert request.scores is not None
        return request.scores

    def _take(self) -> list[_Request]:
        """The oldest requests whose rows fit in ``max_rows`` (at least one)."""
        with self._lock:
            taken, total = 0, 0
            for request in self._queue:
                if taken and total + len(request.rows) > self.max_rows:
                    break
                taken += 1
                total += len(request.rows)
            batch = self._queue[:taken]
            del self._queue[:taken]
        return batch

    def _lead(self, own: _Request) -> None:
        try:
            while not own.done:
                self._run(self._take())
        finally:
            with self._lock:
                if self._queue:
                    self._queue[0].ready.set()  # the oldest waiter leads next
                else:
                    self._busy = False

    def _run(self, batch: list[_Request]) -> None:
        rows = [row for request in batch for row in request.rows]
        try:
            scores = self.forward(rows)
            if len(scores) != len(rows):
                raise RuntimeError(f"forward returned {len(scores)} scores for {len(rows)} pairs")
        except BaseException as exc:  # every waiting request fails closed
            for request in batch:
                request.error = exc
                request.ready.set()
            return
        self.forwards += 1
        self.requests += len(batch)
        self.rows += len(rows)
        start = 0
        for request in batch:
            end = start + len(request.rows)
            request.scores = scores[start:end]
            request.ready.set()
            start = end
