"""Opposite evaluations (``validators.antonyms``, read by ``polarity``): refused only
when both texts name opposite poles."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities
from validators.antonyms import ANTONYMS

DIFFERENT = [
    ("Classify the sentiment: I love this phone.", "Classify the sentiment: I hate this phone."),
    (
        "Is the sentiment positive: the movie was excellent",
        "Is the sentiment positive: the movie was terrible",
    ),
    ("What are the best budget phones?", "What are the worst budget phones?"),
    ("Is it a good idea to pay off my card early?", "Is it a bad idea to pay off my card early?"),
    (
        "What's the cheapest way to send money abroad?",
        "What's the most expensive way to send money abroad?",
    ),
    ("Which is faster, a transfer or a wire?", "Which is slower, a transfer or a wire?"),
    ("Do customers like the new app?", "Do customers dislike the new app?"),
]

SAME = [
    # one pole on one side only is no contrast
    ("Is this a good phone?", "Is this phone worth buying?"),
    ("What are the best budget phones?", "Which budget phones should I buy?"),
    ("I love this phone, how do I reset it?", "How do I reset this phone?"),
    # "like" as a preposition or a polite verb is no evaluation
    ("I would like to change my PIN", "I want to change my PIN"),
    ("What is it like to live in Paris?", "How is life in Paris?"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_opposite_poles_refuse(a: str, b: str) -> None:
    assert mismatch(a, b) == "polarity", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), SAME)
def test_one_pole_or_none_matches(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


def test_every_antonym_pair_is_a_polarity_pair() -> None:
    assert len({name for name, _, _ in ANTONYMS}) == len(ANTONYMS)
    assert extract_entities("I hate it")["polarity"] == {"positive", "antonym_love:-"}
