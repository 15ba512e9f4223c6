"""Proper nouns (``validators.names``): a swapped name refuses, the same name in
another case or a paraphrase that names it too is served."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import Entities, compare_entities, extract_entities
from validators.names import compare_names, mentions

DIFFERENT = [
    (
        "Document: Alice is the CEO of Acme.\nWho is the CEO of Acme?",
        "Document: Bob is the CEO of Acme.\nWho is the CEO of Acme?",
    ),
    ("What is the return policy for Nike shoes?", "What is the return policy for Adidas shoes?"),
    ("Who is the CEO of Microsoft?", "Who is the CEO of Apple?"),
    ("What is the capital of Austria?", "What is the capital of Australia?"),
    ("How do I get from Paris to Lyon by train?", "How do I get from Paris to Nice by train?"),
    ("What is the population of New York?", "What is the population of New Jersey?"),
    # a name on one side that the other text does not hold at all
    ("What is the return policy for Nike shoes?", "What is the return policy for shoes?"),
    ("Can I top up with Apple Pay?", "Can I top up with Google Pay?"),
]

SAME = [
    ("What is the return policy for Nike shoes?", "What's the return policy for Nike shoes?"),
    # the other side names it in lower case, or not as a name (sentence start)
    ("What is the return policy for Nike shoes?", "nike shoes return policy?"),
    ("Is Paris in France?", "is paris in France?"),
    ("Tell me about Paris.", "Paris: tell me about it."),
    ("How do I return Nike's shoes?", "How do I return shoes from nike?"),
    (
        "He ran for Receiver - General of Massachusetts",
        "He ran for Receiver-General of Massachusetts",
    ),
    ("part of the TV remake of the Royales film", "part of the TV - Remake of the Royales - Films"),
    # capitals that are not names: sentence starts, labels, question words, Title Case
    ("Question: How do I reset my password?", "How do I reset my password?"),
    ("Hi, What is my balance?", "what is my balance"),
    ("What Is The Return Policy For Nike Shoes?", "What is the return policy for nike shoes?"),
    ("How do I reset my PIN?", "How do I reset my pin?"),
    # Chinese text writes names both ways: no names are read in it
    ("为什么我不能在Apple Pay中使用我的充值？", "为什么苹果支付充值不成功？"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_a_different_name_refuses(a: str, b: str) -> None:
    # a place is the polarity kind's since session 38 (validators/places.py)
    expected = "polarity" if "Austria" in a or "New York" in a else "name"
    assert mismatch(a, b) == expected, (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_name_in_any_case_matches(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


def test_names_are_titlecase_words_not_at_a_sentence_start() -> None:
    assert extract_entities("Document: Alice is the CEO of Acme.")["name"] == {"alice", "acme"}
    assert "name" not in extract_entities("Paris is nice. London is too.")
    assert extract_entities("Is Nike's return policy good?")["name"] == {"nike"}
    assert extract_entities("Can I pay with PayPal?")["name"] == {"paypal"}


def test_the_name_comparison_reads_the_other_sides_words() -> None:
    assert compare_names({"nike"}, set(), None, {"nike", "shoes"})
    assert not compare_names({"nike"}, set(), None, {"adidas", "shoes"})
    assert compare_names({"films"}, set(), None, {"film"})  # plural and singular
    # without the other side's words (entities built by hand) a one-sided name refuses
    assert not compare_names({"nike"}, set(), None, None)
    assert compare_names({"nike"}, {"nike"}, None, None)


def test_mentions_are_stored_with_the_entities_and_read_back() -> None:
    stored = extract_entities("What is the return policy for Nike shoes?")
    assert stored.mentions is not None and {"nike", "shoes"} <= stored.mentions
    again = Entities.from_dict(stored.to_dict())
    assert again.mentions == stored.mentions
    assert compare_entities(extract_entities("nike shoes return policy"), again).matches
    by_hand = Entities({"name": ["nike"], "polarity": ["positive"]})
    assert by_hand.mentions is None and "_m" not in by_hand.to_dict()


def test_mentions_of_a_long_text_are_not_kept() -> None:
    letters = "abcdefghijklmnopqrstuvwxyz"
    long_text = " ".join("w" + letters[i // 26 % 26] + letters[i % 26] + "x" for i in range(676))
    assert mentions(long_text) is not None  # 676 words
    long_text += " " + " ".join("v" + letters[i // 26 % 26] + letters[i % 26] for i in range(676))
    assert mentions(long_text) is None
    assert mentions("Nike-Adidas shoes") == {"nike-adidas", "nike", "adidas", "shoes"}
