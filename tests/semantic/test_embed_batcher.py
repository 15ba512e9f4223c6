"""EmbedBatcher: concurrent questions share a forward and get their own vectors."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from semantic import Embedder
from semantic.embed_batcher import EmbedBatcher
from semantic.errors import InvalidQuestionError

QUESTIONS = [
    "How do I reset my card PIN?",
    "what is the exchange rate for euros today",
    "My transfer has not arrived yet",
    "Can I get a virtual card?",
    "Why was my top-up declined?",
    "How long does a bank transfer take?",
]


def _queued_together(batcher: EmbedBatcher, texts: list[str]) -> list[object]:
    """Each text from its own thread, all queued while the batcher is busy (as if a
    leader's forward were running), then released at once: one batch."""
    results: list[object] = [None] * len(texts)

    def ask(i: int) -> None:
        try:
            results[i] = batcher.embed_one(texts[i])
        except Exception as exc:
            results[i] = exc

    with batcher._lock:
        batcher._busy = True  # a leader is "running": every caller queues
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while len(batcher._queue) < len(texts):
        assert time.monotonic() < deadline, "callers did not queue"
        time.sleep(0.005)
    with batcher._lock:
        batcher._queue[0].ready.set()  # the leader hands over to the oldest waiter
    for t in threads:
        t.join(timeout=30)
    return results


def test_an_idle_batcher_embeds_at_once_alone(embedder: Embedder) -> None:
    batcher = EmbedBatcher(embedder)
    vector = batcher.embed_one(QUESTIONS[0])
    np.testing.assert_allclose(vector, embedder.embed([QUESTIONS[0]])[0], atol=1e-5)
    assert (batcher.forwards, batcher.questions) == (1, 1)
    assert not batcher._busy and not batcher._queue


def test_concurrent_questions_share_one_forward_and_get_their_own_vectors(
    embedder: Embedder,
) -> None:
    batcher = EmbedBatcher(embedder)
    got = _queued_together(batcher, QUESTIONS)
    assert (batcher.forwards, batcher.questions) == (1, len(QUESTIONS))
    for text, vector in zip(QUESTIONS, got, strict=True):
        assert isinstance(vector, np.ndarray)
        np.testing.assert_allclose(vector, embedder.embed([text])[0], atol=1e-5)
    assert not batcher._busy and not batcher._queue


def test_max_batch_splits_the_queue(embedder: Embedder) -> None:
    batcher = EmbedBatcher(embedder, max_batch=4)
    got = _queued_together(batcher, QUESTIONS)
    assert batcher.questions == len(QUESTIONS) and batcher.forwards == 2
    assert all(isinstance(v, np.ndarray) for v in got)


def test_a_bad_question_fails_alone(embedder: Embedder) -> None:
    batcher = EmbedBatcher(embedder)
    too_long = "please explain the refund policy " * 60
    got = _queued_together(batcher, [QUESTIONS[0], too_long, QUESTIONS[1]])
    assert isinstance(got[1], InvalidQuestionError)
    for i in (0, 2):
        vector = got[i]
        assert isinstance(vector, np.ndarray)
        np.testing.assert_allclose(vector, embedder.embed([QUESTIONS[i // 2]])[0], atol=1e-5)
    with pytest.raises(InvalidQuestionError):  # and alone, the caller gets the error
        batcher.embed_one(too_long)
    assert not batcher._busy
