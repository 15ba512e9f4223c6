"""``lookup(..., local_only=True)`` and the verifier: verdicts the verifier remembers
are served locally, one that needs a forward blocks, and ``verify`` never turns a
WouldBlockError into a verifier error. Real embedder, real migrated SQLite file; the
verifiers are small scripted objects (the subject is the cache's control flow; the
shipped verifier's ``remembered`` is tested in tests/validators/test_verdict_cache.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from semantic.cache import SemanticCache
from semantic.errors import WouldBlockError
from semantic.verification import VERIFIER_ERROR, VERIFIER_REFUSED, verify
from tests.semantic.cache_local_only.support import CUT, OLD, blocked, stored_id
from tests.semantic.helpers import PARAPHRASE, STORED, chat


class Remembering:
    """A scripted verifier: ``scores`` is the forward, ``remembered`` the memory."""

    def __init__(self, score: float, known: list[float] | None) -> None:
        self.score = score
        self.known = known
        self.forwards: list[tuple[str, list[str], str]] = []
        self.recalls: list[tuple[str, list[str], str]] = []

    def scores(self, question: str, candidates: Sequence[str], scope: str = "") -> list[float]:
        self.forwards.append((question, list(candidates), scope))
        return [self.score] * len(candidates)

    def remembered(
        self, question: str, candidates: Sequence[str], scope: str = ""
    ) -> list[float] | None:
        self.recalls.append((question, list(candidates), scope))
        return None if self.known is None else list(self.known)


class ForwardOnly:
    """A verifier without ``remembered``: every verdict needs a forward."""

    def __init__(self) -> None:
        self.forwards = 0

    def scores(self, question: str, candidates: Sequence[str], scope: str = "") -> list[float]:
        self.forwards += 1
        return [0.9] * len(candidates)


class RecallRaises(Remembering):
    def __init__(self, error: Exception) -> None:
        super().__init__(0.9, [0.9])
        self.error = error

    def remembered(
        self, question: str, candidates: Sequence[str], scope: str = ""
    ) -> list[float] | None:
        raise self.error


# -- 7. the verifier ----------------------------------------------------------------------
def test_local_only_serves_remembered_verdicts_and_blocks_for_a_forward(
    cache: SemanticCache,
) -> None:
    entry_id = stored_id(cache, STORED, OLD)
    query = chat(PARAPHRASE)
    scope = cache.partition_key(query)
    verifier = Remembering(0.9, known=None)
    cache.verifier = verifier
    threaded = cache.lookup(query, CUT)
    assert (threaded.hit, threaded.entry_id, threaded.verifier_score) == (True, entry_id, 0.9)
    assert verifier.forwards == [(PARAPHRASE, [STORED], scope)]

    assert blocked(cache, query, CUT) == "verifier"  # remembered() knows nothing
    assert verifier.recalls == [(PARAPHRASE, [STORED], scope)]  # scoped to the partition

    verifier.known = [0.9]
    assert cache.lookup(query, CUT, local_only=True) == threaded
    verifier.known, verifier.score = [0.2], 0.2
    refused = cache.lookup(query, CUT, local_only=True)
    assert (refused.hit, refused.reason, refused.verifier_score) == (False, VERIFIER_REFUSED, 0.2)
    assert cache.lookup(query, CUT) == refused
    assert len(verifier.forwards) == 2  # local lookups never ran a forward


def test_a_verifier_without_remembered_always_blocks_a_verified_local_lookup(
    cache: SemanticCache,
) -> None:
    stored_id(cache, STORED, OLD)
    verifier = ForwardOnly()
    cache.verifier = verifier
    for _ in range(2):
        assert cache.lookup(chat(PARAPHRASE), CUT).hit
        assert blocked(cache, chat(PARAPHRASE), CUT) == "verifier"
    assert verifier.forwards == 2
    # The stored question itself needs no verdict (it scores 1.0 unverified): local.
    assert cache.lookup(chat(STORED), CUT).hit
    exact = cache.lookup(chat(STORED), CUT, local_only=True)
    assert (exact.hit, exact.verifier_score) == (True, 1.0)
    assert verifier.forwards == 2


def test_verify_never_turns_would_block_into_a_verifier_error(cache: SemanticCache) -> None:
    with pytest.raises(WouldBlockError) as unknown:
        verify(Remembering(0.9, known=None), PARAPHRASE, [STORED], "k", local_only=True)
    assert unknown.value.reason == "verifier"
    with pytest.raises(WouldBlockError):
        verify(ForwardOnly(), PARAPHRASE, [STORED], "k", local_only=True)
    busy = RecallRaises(WouldBlockError("verdict cache busy", reason="verifier"))
    with pytest.raises(WouldBlockError):
        verify(busy, PARAPHRASE, [STORED], "k", local_only=True)
    # Any other failure still fails closed, locally as threaded.
    broken = RecallRaises(RuntimeError("boom"))
    assert verify(broken, PARAPHRASE, [STORED], "k", local_only=True) == (None, VERIFIER_ERROR)
    assert verify(Remembering(0.9, [0.9]), PARAPHRASE, [STORED], "k", local_only=True) == (
        [0.9],
        None,
    )

    # Through the cache: the lookup raises rather than answering verifier_error.
    stored_id(cache, STORED, OLD)
    cache.verifier = Remembering(0.9, known=[0.9])
    assert cache.lookup(chat(PARAPHRASE), CUT).hit
    cache.verifier = busy
    assert blocked(cache, chat(PARAPHRASE), CUT) == "verifier"
