"""Micro-batching of concurrent verifications (validators/verify_batcher.py): requests
that arrive while a forward runs share the next one, each gets its own scores (equal
to scoring it alone, with the real model), and a failed forward fails every request
that was waiting on it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from validators.verifier import PairVerifier
from validators.verify_batcher import Row, VerifyBatcher


def rows_of(*ids: int) -> list[Row]:
    return [([i], [0]) for i in ids]


class GatedForward:
    """A forward that holds its first call until released, so others queue behind it."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls: list[list[int]] = []
        self.fail_on = fail_on

    def __call__(self, rows: list[Row]) -> list[float]:
        self.calls.append([int(ids[0]) for ids, _ in rows])
        if len(self.calls) == 1:
            self.started.set()
            assert self.release.wait(10)
        if self.fail_on is not None and len(self.calls) == self.fail_on:
            raise RuntimeError("the model failed")
        return [float(ids[0]) * 10 for ids, _ in rows]


def queue_behind_first(batcher: VerifyBatcher, forward: GatedForward, waiting: int) -> list[object]:
    """Request 0 leads and blocks; ``waiting`` more requests queue; then release."""
    results: list[object] = [None] * (waiting + 1)

    def call(k: int) -> None:
        try:
            results[k] = batcher.score_rows(rows_of(100 * k, 100 * k + 1))
        except RuntimeError as exc:
            results[k] = exc

    threads = [threading.Thread(target=call, args=(0,))]
    threads[0].start()
    assert forward.started.wait(10)
    for k in range(1, waiting + 1):
        threads.append(threading.Thread(target=call, args=(k,)))
        threads[-1].start()
    while len(batcher._queue) < waiting:  # all queued behind the running forward
        threading.Event().wait(0.001)
    forward.release.set()
    for t in threads:
        t.join(10)
    return results


def test_an_idle_batcher_scores_at_once() -> None:
    forward = GatedForward()
    forward.release.set()
    batcher = VerifyBatcher(forward)
    assert batcher.score_rows(rows_of(1, 2)) == [10.0, 20.0]
    assert batcher.score_rows([]) == []
    assert batcher.forwards == 1


def test_waiting_requests_share_one_forward_and_get_their_own_scores() -> None:
    forward = GatedForward()
    batcher = VerifyBatcher(forward, max_rows=32)
    results = queue_behind_first(batcher, forward, waiting=5)
    for k, scores in enumerate(results):
        assert scores == [1000.0 * k, 1000.0 * k + 10]
    assert len(forward.calls) == 2  # the leader's own, then all five waiting together
    assert len(forward.calls[1]) == 10
    assert (batcher.forwards, batcher.requests, batcher.rows) == (2, 6, 12)


def test_a_forward_takes_whole_requests_up_to_max_rows() -> None:
    forward = GatedForward()
    batcher = VerifyBatcher(forward, max_rows=5)  # two requests of two rows fit, not three
    results = queue_behind_first(batcher, forward, waiting=5)
    assert all(not isinstance(r, Exception) for r in results)
    assert [len(c) for c in forward.calls] == [2, 4, 4, 2]


def test_a_failed_forward_fails_every_request_waiting_on_it() -> None:
    forward = GatedForward(fail_on=2)  # the batched forward of the waiting requests
    batcher = VerifyBatcher(forward)
    results = queue_behind_first(batcher, forward, waiting=4)
    assert results[0] == [0.0, 10.0]  # its own forward succeeded
    assert all(isinstance(r, RuntimeError) for r in results[1:])
    # The batcher is left idle and usable.
    assert batcher.score_rows(rows_of(7)) == [70.0]


def test_max_rows_must_be_positive() -> None:
    with pytest.raises(ValueError):
        VerifyBatcher(GatedForward(), max_rows=0)


# -- with the real shipped model ------------------------------------------------------

QUESTIONS = [
    "How do I reset my password?",
    "Why was my card payment declined?",
    "How long does a transfer take?",
    "Can I get a refund for a duplicate charge?",
    "How do I convert Celsius to Fahrenheit?",
    "What is the exchange rate for $100 to euros?",
    "Where can I see my pending transactions?",
    "How do I activate my new card?",
]
CANDIDATES = [
    "I forgot my password, how can I reset it?",
    "Why did my card payment not go through?",
    "When will my transfer arrive?",
    "How do I convert Fahrenheit to Celsius?",
    "What is the exchange rate for $500 to euros?",
]


@pytest.mark.slow
def test_concurrent_batched_scores_equal_serial_scores() -> None:
    verifier = PairVerifier(cache_size=0)
    serial = [verifier.score(q, CANDIDATES) for q in QUESTIONS]
    before = verifier.batcher.forwards
    start = threading.Barrier(len(QUESTIONS))

    def lookup(q: str) -> list[float]:
        start.wait()
        return verifier.score(q, CANDIDATES)

    for _ in range(3):  # several rounds: the threads' arrivals differ each time
        with ThreadPoolExecutor(len(QUESTIONS)) as pool:
            concurrent = list(pool.map(lookup, QUESTIONS))
        for got, expected in zip(concurrent, serial, strict=True):
            assert got == pytest.approx(expected, abs=1e-5)
    # Requests were folded together at least once (fewer forwards than requests).
    assert verifier.batcher.forwards - before < 3 * len(QUESTIONS)
