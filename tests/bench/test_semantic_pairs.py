"""The pair builders of the semantic-cache evaluation (bench/semantic_pairs.py).

No embedder: neighbour-based builders get cheap, deterministic bag-of-words
vectors. The last tests run the builders on the real data in ../shared/data.
"""

from __future__ import annotations

import random
import re
import zlib

import numpy as np
import pytest

from bench.semantic_pairs import (
    CONTEXT,
    DATA_DIR,
    ENTITY,
    HARD,
    POSITIVE,
    POSITIVE_RANDOM,
    Conversation,
    Question,
    apply,
    context_pairs,
    entity_pairs,
    intent_pairs,
    load_banking77,
    load_clinc150,
    load_conversations,
    normalized,
    sample_per_intent,
    substitute_value,
    value_tokens,
)


def fake_vectors(texts: list[str], dim: int = 128) -> np.ndarray:
    """Hashed bag of words (plus a constant, so no vector is zero)."""
    out = np.full((len(texts), dim), 0.01, dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"[a-z0-9$£€]+", text.lower()):
            out[row, zlib.crc32(word.encode()) % dim] += 1.0
    return out


QUESTIONS = [
    Question("How do I reset my password?", "password", "demo"),
    Question("How can I reset my password", "password", "demo"),
    Question("I forgot my password, how do I reset it?", "password", "demo"),
    Question("Reset password please", "password", "demo"),
    Question("How do I change my PIN?", "pin", "demo"),
    Question("Can I change my PIN number?", "pin", "demo"),
    Question("Where do I change the PIN of my card", "pin", "demo"),
    Question("Send $20 to my brother", "transfer", "demo"),
    Question("Transfer 20 dollars to my brother", "transfer", "demo"),
    Question("Send $500 to my brother", "transfer", "demo"),
    Question("I want to send money to my brother", "transfer", "demo"),
    Question("what's the weather tomorrow", "weather", "other"),
    Question("what's the weather like tomorrow", "weather", "other"),
    Question("what's the weather today", "weather", "other"),
    Question("will it rain today", "weather", "other"),
    Question("set an alarm for 7am", "alarm", "other"),
    Question("wake me up at 7am", "alarm", "other"),
    Question("set an alarm for 6am", "alarm", "other"),
]

CONVERSATIONS = [
    Conversation("Can you explain inflation?", "...", "What are its types?"),
    Conversation("What is a tax?", "...", "What are its types?"),
    Conversation("Describe the political system of Canada.", "...", "Who leads it?"),
    Conversation("What is the capital of France?", "...", "What landmark is in Paris?"),
    Conversation("Explain photosynthesis.", "...", "Where does it happen?"),
]


# -- value tokens and substitutions ---------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("send two dollars", "send 2 dollars"),
        ("transfer $20", "transfer 20 USD"),
        ("I got £1,000 back", "I got £1000 back"),
        ("meet on Friday", "meet on friday"),
        ("get a new one", "get another card"),  # "one" is a pronoun, not a value
    ],
)
def test_value_tokens_agree(a: str, b: str) -> None:
    assert value_tokens(a) == value_tokens(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("send $20", "send $500"),
        ("send $20", "send £20"),
        ("alarm at 5am", "alarm at 5pm"),
        ("weather today", "weather tomorrow"),
        ("book for march 3rd", "book for april 3rd"),
        ("meet on monday", "meet on tuesday"),
    ],
)
def test_value_tokens_differ(a: str, b: str) -> None:
    assert value_tokens(a) != value_tokens(b)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I want to transfer $20 to my friend", "amount"),
        ("transfer 100 dollars checking to savings", "amount"),
        ("reserve a table at 8:00", "time"),
        ("set an alarm for 6pm", "time"),
        ("what do i have planned for 3/5", "slash_date"),
        ("book a hotel for the 10th", "ordinal_day"),
        ("what happened in 2018", "year"),
        ("where is order 1234567", "identifier"),
        ("roll a 10 sided dice", "number"),
        ("set a five minute timer", "number_word"),
        ("am i free on friday", "weekday"),
        ("a flight in january", "month"),
        ("what's the weather tomorrow", "relative_day"),
        ("meetings next week", "relative_week"),
    ],
)
def test_substitution_changes_one_value(text: str, kind: str) -> None:
    for seed in range(5):
        sub = substitute_value(text, random.Random(seed))
        assert sub is not None and sub.kind == kind
        changed = apply(text, sub)
        assert text[: sub.start] == changed[: sub.start]
        assert text[sub.end :] == changed[sub.start + len(sub.new) :]
        assert sub.old == text[sub.start : sub.end] and sub.new != sub.old
        assert value_tokens(changed) != value_tokens(text)


def test_substitution_keeps_values_plausible() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        time_sub = substitute_value("reserve a table at 8:30", rng)
        assert time_sub is not None and re.fullmatch(r"(?:[1-9]|1[0-2]):30", time_sub.new)
        day = substitute_value("from the 21st", rng)
        assert day is not None and re.fullmatch(r"\d{1,2}(?:st|nd|rd|th)", day.new)
        assert 1 <= int(day.new[:-2]) <= 28 and day.new != "21st"
        amount = substitute_value("charged £1,200 extra", rng)
        assert amount is not None and re.fullmatch(r"£\d{1,3}(?:,\d{3})*", amount.new)


@pytest.mark.parametrize(
    "text",
    ["i need to rollover my 401k", "what is one fun fact", "where is my w-2", "hello there"],
)
def test_no_substitution_without_a_value(text: str) -> None:
    assert substitute_value(text, random.Random(0)) is None


# -- builders on fixtures ----------------------------------------------------------------


def _intent_pairs(seed: int = 0, n: int = 100) -> dict:
    return intent_pairs(
        QUESTIONS,
        fake_vectors([q.text for q in QUESTIONS]),
        n_positive=n,
        n_hard=n,
        seed=seed,
    )


def test_intent_pairs_labels_and_rules() -> None:
    by_text = {q.text: q for q in QUESTIONS}
    pairs = _intent_pairs()
    assert pairs[POSITIVE] and pairs[POSITIVE_RANDOM] and pairs[HARD]
    for kind in (POSITIVE, POSITIVE_RANDOM):
        for p in pairs[kind]:
            q, c = by_text[p.query], by_text[p.cached]
            assert p.kind == kind and p.same_answer
            assert q.intent == c.intent and q.source == c.source
            assert normalized(q.text) != normalized(c.text)
            assert value_tokens(q.text) == value_tokens(c.text)
    for p in pairs[HARD]:
        q, c = by_text[p.query], by_text[p.cached]
        assert p.kind == HARD and not p.same_answer
        assert q.intent != c.intent and q.source == c.source
    # "Send $500" has no same-intent partner with the same values.
    assert all("$500" not in t for p in pairs[POSITIVE] for t in (p.query, p.cached))


def test_intent_pairs_are_unique_capped_and_nearest() -> None:
    pairs = _intent_pairs()
    for kind, found in pairs.items():
        keys = [frozenset((normalized(p.query), normalized(p.cached))) for p in found]
        assert len(keys) == len(set(keys)), kind
    small = _intent_pairs(n=2)
    assert all(len(v) <= 2 for v in small.values())
    # The nearest same-intent partner of an exact rewording is that rewording.
    nearest = {frozenset((p.query, p.cached)) for p in pairs[POSITIVE]}
    assert frozenset(("How do I reset my password?", "How can I reset my password")) in nearest


def test_intent_pairs_deterministic() -> None:
    assert _intent_pairs(seed=3) == _intent_pairs(seed=3)


def test_intent_pairs_need_one_vector_per_question() -> None:
    with pytest.raises(ValueError):
        intent_pairs(QUESTIONS, np.ones((2, 4)), n_positive=1, n_hard=1, seed=0)


def test_sample_per_intent() -> None:
    sample = sample_per_intent(QUESTIONS, 2, seed=1)
    intents = {(q.source, q.intent) for q in QUESTIONS}
    assert len(sample) == 2 * len(intents)
    assert sample == sample_per_intent(QUESTIONS, 2, seed=1)
    assert sample != sample_per_intent(QUESTIONS, 2, seed=2)


def test_entity_pairs_fixture() -> None:
    pairs = entity_pairs(QUESTIONS, 100, seed=0)
    originals = {q.text for q in QUESTIONS}
    with_values = [q for q in QUESTIONS if substitute_value(q.text, random.Random(0))]
    assert len(pairs) == len(with_values)
    for p in pairs:
        assert p.kind == ENTITY and not p.same_answer
        assert (p.query in originals) != (p.cached in originals)
        assert value_tokens(p.query) != value_tokens(p.cached)
        assert p.meta["old"] in (p.cached if p.meta["substituted"] == "query" else p.query)
    assert len(entity_pairs(QUESTIONS, 3, seed=0)) == 3


def test_entity_pairs_deterministic() -> None:
    assert entity_pairs(QUESTIONS, 100, seed=5) == entity_pairs(QUESTIONS, 100, seed=5)


def test_context_pairs_fixture() -> None:
    mains = fake_vectors([c.main for c in CONVERSATIONS])
    follows = fake_vectors([c.followup for c in CONVERSATIONS])
    pairs, excluded = context_pairs(CONVERSATIONS, mains, follows, 100, seed=0)
    assert excluded == {"identical_followup_pairs": 1}  # "What are its types?" twice
    followups = {c.followup for c in CONVERSATIONS}
    subkinds = {p.subkind for p in pairs}
    assert subkinds == {"own_main", "other_main", "other_followup"}
    for p in pairs:
        assert p.kind == CONTEXT and not p.same_answer
        assert p.query in followups
        assert normalized(p.query) != normalized(p.cached)
        if p.subkind == "own_main":
            assert p.cached == p.meta["main_question"]
        if p.subkind == "other_main":
            assert p.cached != p.meta["main_question"] and p.cached not in followups
    assert sum(p.subkind == "own_main" for p in pairs) == len(CONVERSATIONS)
    again, _ = context_pairs(CONVERSATIONS, mains, follows, 100, seed=0)
    assert pairs == again
    capped, _ = context_pairs(CONVERSATIONS, mains, follows, 3, seed=0)
    assert len(capped) == 3


# -- the real data -------------------------------------------------------------------------

needs_data = pytest.mark.skipif(not (DATA_DIR / "banking77").is_dir(), reason="no shared data")


@pytest.fixture(scope="module")
def real() -> tuple[list[Question], list[Question]]:
    return load_banking77(), load_clinc150()


@needs_data
def test_real_data_loads(real: tuple[list[Question], list[Question]]) -> None:
    (banking, clinc), convs = real, load_conversations()
    assert 12_000 < len(banking) <= 13_083 and len({q.intent for q in banking}) == 77
    assert 22_000 < len(clinc) <= 22_500 and len({q.intent for q in clinc}) == 150
    assert 250 < len(convs) <= 432
    for qs in (banking, clinc):
        norms = [(q.source, normalized(q.text)) for q in qs]
        assert len(norms) == len(set(norms))


@needs_data
def test_real_entity_negatives(real: tuple[list[Question], list[Question]]) -> None:
    pairs = entity_pairs(real[0] + real[1], 1000, seed=0)
    assert len(pairs) == 1000
    kinds = {p.subkind for p in pairs}
    assert {"amount", "time", "number", "relative_day", "weekday", "month"} <= kinds
    for p in pairs:
        assert not p.same_answer and p.query != p.cached
        assert value_tokens(p.query) != value_tokens(p.cached)
        assert p.meta["query_intent"] == p.meta["cached_intent"]


@needs_data
def test_real_intent_pairs_with_fake_vectors(
    real: tuple[list[Question], list[Question]],
) -> None:
    pool = sample_per_intent(real[0], 8, seed=0) + sample_per_intent(real[1], 4, seed=0)
    pairs = intent_pairs(
        pool, fake_vectors([q.text for q in pool]), n_positive=500, n_hard=500, seed=0
    )
    assert len(pairs[POSITIVE]) == 500 and len(pairs[HARD]) == 500
    assert {p.meta["source"] for p in pairs[HARD]} == {"banking77", "clinc150"}
    for p in pairs[POSITIVE]:
        assert value_tokens(p.query) == value_tokens(p.cached)
        assert p.meta["query_intent"] == p.meta["cached_intent"]
    for p in pairs[HARD]:
        assert p.meta["query_intent"] != p.meta["cached_intent"]
