"""The gateway's verifier with batching and the verdict cache, through the semantic
cache's fail-closed ``verify``: a forward that fails while lookups wait on it makes
every one of them ``verifier_error`` (a miss, never a hit), and nothing it did not
compute is remembered; in int8, where each pair runs alone and lookups are not merged,
each waiting lookup's own forward fails it the same way. The cache size comes from the
settings."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from gateway.settings import get_settings
from gateway.verification import GatewayVerifier, load_verifier
from semantic.verification import VERIFIER_ERROR, verify
from validators.verify_batcher import Row

pytestmark = pytest.mark.slow

QUESTIONS = [
    "How do I reset my password?",
    "Why was my card payment declined?",
    "How long does a transfer take?",
    "How do I activate my new card?",
]
CANDIDATES = ["I forgot my password, how can I reset it?", "When will my transfer arrive?"]


@pytest.fixture(scope="module", params=["float32", "int8"])
def verifier(request: pytest.FixtureRequest) -> GatewayVerifier:
    return load_verifier(cache_size=100, dtype=request.param)


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    get_settings.cache_clear()
    monkeypatch.setenv("CACHEGATE_VERIFIER_CACHE_SIZE", "0")
    yield
    get_settings.cache_clear()


def test_a_failed_batched_forward_is_a_miss_for_every_waiting_lookup(
    verifier: GatewayVerifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = verifier.model
    model.cache.clear()
    entered = threading.Event()
    release = threading.Event()
    calls: list[int] = []

    def broken(rows: list[Row]) -> list[float]:
        calls.append(len(rows))
        if len(calls) == 1:  # hold the first, so the others queue behind it
            entered.set()
            assert release.wait(10)
        raise RuntimeError("the model failed")

    monkeypatch.setattr(model.en, "forward", broken)
    with ThreadPoolExecutor(len(QUESTIONS)) as pool:
        first = pool.submit(verify, verifier, QUESTIONS[0], CANDIDATES)
        assert entered.wait(10)
        rest = [pool.submit(verify, verifier, q, CANDIDATES) for q in QUESTIONS[1:]]
        while len(model.batcher._queue) < len(rest):
            threading.Event().wait(0.001)
        release.set()
        results = [first.result(10)] + [f.result(10) for f in rest]
    assert results == [(None, VERIFIER_ERROR)] * len(QUESTIONS)
    if model.dtype == "int8":
        assert len(calls) == len(QUESTIONS)  # one lookup a forward, each failed closed
    else:
        assert len(calls) == 2  # the leader's forward, then one batched forward for the rest
    assert len(model.cache) == 0  # nothing remembered from a failed forward
    monkeypatch.undo()
    scores, failure = verify(verifier, QUESTIONS[0], CANDIDATES)
    assert failure is None and scores is not None and len(scores) == 2


def test_the_cache_size_comes_from_the_settings(settings_env: None) -> None:
    off = load_verifier()
    assert not off.model.cache.enabled
    off.scores(QUESTIONS[0], CANDIDATES)
    assert len(off.model.cache) == 0
