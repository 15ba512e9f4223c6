"""The verifier seam of the semantic cache (semantic/verification.py): with a
``verifier_cut`` in the policy, candidates that passed the threshold and the
validator are scored in one batch and served only above the cut; a verifier that
raises, answers nonsense or is missing is a miss, never a hit. Real embedder,
real SQLite store. The verifiers here are small scripted objects on purpose: the
shipped model's own decisions are tested through the gateway
(tests/gateway/proxy/test_verifier_hits.py); this file pins what the cache does
with whatever a verifier answers."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import pytest

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.policy import SemanticPolicy
from semantic.store import EntryStore
from semantic.verification import (
    VERIFIER_ERROR,
    VERIFIER_REFUSED,
    VERIFIER_UNAVAILABLE,
    HitVerifier,
)
from tests.semantic.helpers import PARAPHRASE, STORED, DigitValidator, ManualClock, chat, reply

OTHER = "How do I reset my pass word?"  # a second stored question near PARAPHRASE
CUT = SemanticPolicy(threshold=0.5, verifier_cut=0.5)


class Scripted:
    """Scores each cached question from a table; records every call."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[tuple[str, list[str]]] = []
        self.scopes: list[str] = []

    def scores(self, question: str, candidates: Sequence[str], scope: str = "") -> list[float]:
        self.calls.append((question, list(candidates)))
        self.scopes.append(scope)
        return [self.table[c] for c in candidates]


class Raising:
    def scores(self, question: str, candidates: Sequence[str], scope: str = "") -> list[float]:
        raise RuntimeError("model crashed")


class Answers:
    def __init__(self, answer: list[float]) -> None:
        self.answer = answer

    def scores(self, question: str, candidates: Sequence[str], scope: str = "") -> list[float]:
        return self.answer


@pytest.fixture
def cache(embedder: Embedder, sqlite_url: str, clock: ManualClock) -> Iterator[SemanticCache]:
    store = EntryStore(sqlite_url)
    c = SemanticCache(embedder, store, validator=DigitValidator(), clock=clock)
    c.store(chat(STORED), reply("stored"), CUT)
    c.store(chat(OTHER), reply("other"), CUT)
    yield c
    store.close()


def lookup(cache: SemanticCache, verifier: HitVerifier | None, policy: SemanticPolicy = CUT):
    cache.verifier = verifier
    return cache.lookup(chat(PARAPHRASE), policy)


def test_scored_in_one_batch_and_served_only_above_the_cut(cache: SemanticCache) -> None:
    v = Scripted({STORED: 0.9, OTHER: 0.2})
    r = lookup(cache, v)
    assert r.hit and r.cached_question == STORED and r.verifier_score == 0.9
    assert len(v.calls) == 1 and sorted(v.calls[0][1]) == sorted([STORED, OTHER])


def test_the_best_candidate_above_the_cut_wins_even_below_another_in_cosine(
    cache: SemanticCache,
) -> None:
    r = lookup(cache, Scripted({STORED: 0.1, OTHER: 0.8}))
    assert r.hit and r.cached_question == OTHER and r.verifier_score == 0.8


def test_every_candidate_at_or_below_the_cut_is_a_verifier_refused_miss(
    cache: SemanticCache,
) -> None:
    r = lookup(cache, Scripted({STORED: 0.5, OTHER: 0.3}))  # 0.5 is not above 0.5
    assert not r.hit and r.reason == VERIFIER_REFUSED and r.answer is None
    assert r.verifier_score in (0.5, 0.3)


def test_a_looser_cut_serves_what_a_stricter_one_refuses(cache: SemanticCache) -> None:
    v = Scripted({STORED: 0.7, OTHER: 0.1})
    assert lookup(cache, v, SemanticPolicy(threshold=0.5, verifier_cut=0.6)).hit
    assert lookup(cache, v, SemanticPolicy(threshold=0.5, verifier_cut=0.8)).reason == (
        VERIFIER_REFUSED
    )


@pytest.mark.parametrize(
    "verifier",
    [Raising(), Answers([0.9]), Answers([math.nan, 0.9]), Answers([1.5, 0.9])],
    ids=["raises", "too_few_scores", "nan", "out_of_range"],
)
def test_a_failing_verifier_is_a_miss_never_a_hit(
    cache: SemanticCache, verifier: HitVerifier
) -> None:
    r = lookup(cache, verifier)
    assert not r.hit and r.reason == VERIFIER_ERROR and r.answer is None
    # Positive control: the same lookup is served by a verifier that answers sanely.
    assert lookup(cache, Answers([0.9, 0.9])).hit


def test_a_cut_without_a_verifier_is_a_miss(cache: SemanticCache) -> None:
    assert lookup(cache, None).reason == VERIFIER_UNAVAILABLE
    # Without a cut the verifier is never asked (the cosine path of before).
    v = Scripted({STORED: 0.0, OTHER: 0.0})
    assert lookup(cache, v, SemanticPolicy(threshold=0.5)).hit and v.calls == []


def test_the_trace_records_each_verified_candidates_score(cache: SemanticCache) -> None:
    cache.verifier = Scripted({STORED: 0.2, OTHER: 0.7})
    dry = cache.lookup(chat(PARAPHRASE), CUT, trace=True)
    assert dry.trace is not None and dry.trace.verifier_cut == 0.5
    scores = {c.entry.question: c.verifier_score for c in dry.trace.candidates if c.entry}
    assert scores == {STORED: 0.2, OTHER: 0.7}
    refusals = {c.entry.question: c.refusal for c in dry.trace.candidates if c.entry}
    assert refusals == {STORED: VERIFIER_REFUSED, OTHER: None}
    served = cache.lookup(chat(PARAPHRASE), CUT)  # the dry run decided as serving does
    assert served.hit and served.entry_id == dry.entry_id


def test_the_same_question_needs_no_verifier(cache: SemanticCache) -> None:
    # Equal once normalized (case, spaces, trailing punctuation): served with score 1.0,
    # the verifier never asked; a different question still goes to it.
    cache.verifier = v = Raising()
    r = cache.lookup(chat("  how do I RESET my password "), CUT)
    assert r.hit and r.cached_question == STORED and r.verifier_score == 1.0
    assert lookup(cache, v).reason == VERIFIER_ERROR


@pytest.mark.parametrize(
    ("stored", "asked"),
    [("Was bedeutet Maße?", "Was bedeutet Masse?"), ("How much is 20!", "How much is 20?")],
    ids=["case_folding", "factorial"],
)
def test_what_normalization_used_to_fold_goes_to_the_verifier(
    cache: SemanticCache, stored: str, asked: str
) -> None:
    # The old normalization made these one question, served unverified (and a backfill
    # of one overwrote the other's entry); now each is its own entry and the verifier
    # decides between them.
    cache.store(chat(stored), reply("stored"), CUT)
    cache.verifier = refusing = Scripted({stored: 0.0, STORED: 0.0, OTHER: 0.0})
    r = cache.lookup(chat(asked), CUT)
    assert not r.hit and any(stored in c for _, c in refusing.calls)
    assert cache.lookup(chat(stored), CUT).hit  # positive control: the question itself


def test_the_verifier_is_scoped_to_the_tenants_partition(cache: SemanticCache) -> None:
    # A verifier that remembers scores keeps them per scope; the cache must pass a
    # scope that names the tenant, so no two tenants share remembered verdicts.
    verifier = Scripted({STORED: 0.9, OTHER: 0.1})
    cache.verifier = verifier
    assert cache.lookup(chat(PARAPHRASE), CUT).hit  # positive control
    cache.store(chat(STORED, tenant="tenant-b"), reply("b's"), CUT)
    cache.store(chat(OTHER, tenant="tenant-b"), reply("b's other"), CUT)
    assert cache.lookup(chat(PARAPHRASE, tenant="tenant-b"), CUT).hit
    first, second = verifier.scopes
    assert first and second and first != second
    assert first == cache.partition_key(chat(PARAPHRASE))
    assert second == cache.partition_key(chat(PARAPHRASE, tenant="tenant-b"))


class Unread(Scripted):
    """Scripted, and says why it refused a pair unread (a score of 0)."""

    def __init__(self, table: dict[str, float], why: dict[str, str]) -> None:
        super().__init__(table)
        self.why = why
        self.asked: list[str] = []

    def unread_reason_known(self, question: str, candidate: str, scope: str = "") -> str | None:
        self.asked.append(candidate)
        return self.why.get(candidate)


class UnreadRaising(Scripted):
    def unread_reason_known(self, question: str, candidate: str, scope: str = "") -> str | None:
        raise RuntimeError("broken")


def test_a_miss_whose_best_candidate_was_unread_says_why(cache: SemanticCache) -> None:
    v = Unread({STORED: 0.0, OTHER: 0.0}, {STORED: "language_mismatch", OTHER: "too_many_tokens"})
    r = lookup(cache, v)
    assert not r.hit and r.reason == VERIFIER_REFUSED and r.verifier_score == 0.0
    # asked once, of the refusal the result reports (the best candidate by cosine)
    assert len(v.asked) == 1 and r.verifier_unread == v.why[v.asked[0]]
    # positive control: a pair it read (score above 0) is not asked about
    read = Unread({STORED: 0.3, OTHER: 0.2}, {STORED: "language_mismatch"})
    r = lookup(cache, read)
    assert r.reason == VERIFIER_REFUSED and r.verifier_unread is None and read.asked == []
    # a hit asks nothing, even with a candidate it could not read
    hit = Unread({STORED: 0.9, OTHER: 0.0}, {OTHER: "language_mismatch"})
    r = lookup(cache, hit)
    assert r.hit and r.verifier_unread is None and hit.asked == []


def test_a_verifier_without_reasons_or_failing_to_give_one_changes_nothing(
    cache: SemanticCache,
) -> None:
    for v in (Scripted({STORED: 0.0, OTHER: 0.0}), UnreadRaising({STORED: 0.0, OTHER: 0.0})):
        r = lookup(cache, v)
        assert not r.hit and r.reason == VERIFIER_REFUSED and r.verifier_unread is None
