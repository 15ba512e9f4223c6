"""Concurrent single-question embeddings folded into one forward.

Lookups run in the gateway's worker threads, one question each. While one
thread's forward runs (torch releases the GIL), questions arriving in other
threads queue up; the next forward takes all of them at once (up to
``max_batch``). Nothing ever waits for company: a question that finds the
embedder idle is embedded at once, alone, so a quiet server pays no latency
for the batching, and a busy one pays one forward for many questions.

One thread at a time is the *leader*: it runs forwards over the queue until its
own question is done, then hands the role to the oldest waiting question's
thread (or leaves the embedder idle), so no caller serves others indefinitely.
A batch that fails (one question too long, say) is retried one question at a
time, so each caller gets its own vector or its own error.
"""

from __future__ import annotations

import threading

import numpy as np
from numpy.typing import NDArray

from semantic.embedder_base import TextEmbedder

#: Most questions in one forward (short questions: padding stays cheap).
DEFAULT_MAX_BATCH = 32


class _Item:
    __slots__ = ("error", "ready", "text", "vector")

    def __init__(self, text: str) -> None:
        self.text = text
        self.vector: NDArray[np.float32] | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()  # set when done, or when promoted to leader

    @property
    def done(self) -> bool:
        return self.vector is not None or self.error is not None


class EmbedBatcher:
    """``embed_one(text)`` from any thread; concurrent calls share forwards."""

    def __init__(self, embedder: TextEmbedder, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.embedder = embedder
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Item] = []
        self._busy = False  # a leader is running forwards
        self.forwards = 0  # forwards run (batched calls of embedder.embed)
        self.questions = 0  # questions embedded through them

    def embed_one(self, text: str) -> NDArray[np.float32]:
        """The ``(dim,)`` unit vector of ``text``; raises what ``embedder.embed`` raises."""
        item = _Item(text)
        with self._lock:
            self._queue.append(item)
            lead = not self._busy
            self._busy = True
        if not lead:
            item.ready.wait()
        if not item.done:  # idle embedder, or promoted by the previous leader
            self._lead(item)
        if item.error is not None:
            raise item.error
        assert item.vector is not None
        return item.vector

    def _lead(self, own: _Item) -> None:
        try:
            while not own.done:
                with self._lock:
                    batch = self._queue[: self.max_batch]
                    del self._queue[: self.max_batch]
                self._run(batch)
        finally:
            with self._lock:
                if self._queue:
                    self._queue[0].ready.set()  # the oldest waiter leads next
                else:
                    self._busy = False

    def _run(self, batch: list[_Item]) -> None:
        try:
            vectors = self.embedder.embed([item.text for item in batch])
        except BaseException as exc:  # handed to the callers, who re-raise it
            if len(batch) == 1:
                batch[0].error = exc
                batch[0].ready.set()
                return
            for item in batch:  # whose question failed: each alone
                self._run([item])
            return
        self.forwards += 1
        self.questions += len(batch)
        for item, vector in zip(batch, vectors, strict=True):
            item.vector = np.array(vector)  # its own row, not a view of the batch
            item.ready.set()
