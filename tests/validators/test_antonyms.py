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
    # directions and levels a review found served (session 43, verifier 0.982-0.996)
    (
        "What are the symptoms of high blood pressure?",
        "What are the symptoms of low blood pressure?",
    ),
    (
        "Which lane do I use to turn left at a roundabout?",
        "Which lane do I use to turn right at a roundabout?",
    ),
    ("How do I zoom in on a photo?", "How do I zoom out on a photo?"),
    ("Can I check in early?", "Can I check out early?"),
    ("How do I set up an inbound firewall rule?", "How do I set up an outbound firewall rule?"),
    ("Why are my incoming calls dropped?", "Why are my outgoing calls dropped?"),
    ("Will interest rates go up this year?", "Will interest rates go down this year?"),
    ("What time zone is the east coast in?", "What time zone is the west coast in?"),
    ("Is the pain in my left arm serious?", "Is the pain in my right arm serious?"),
    ("How do I align text vertically?", "How do I align text horizontally?"),
]

SAME = [
    # one pole on one side only is no contrast
    ("Is this a good phone?", "Is this phone worth buying?"),
    ("What are the best budget phones?", "Which budget phones should I buy?"),
    ("I love this phone, how do I reset it?", "How do I reset this phone?"),
    # "like" as a preposition or a polite verb is no evaluation
    ("I would like to change my PIN", "I want to change my PIN"),
    ("What is it like to live in Paris?", "How is life in Paris?"),
    # "how high" and "how low" ask one level from two ends
    ("How high is the air pressure in my tires?", "How low is the air pressure in my tires?"),
    # left as what remains, right as correct: no side
    ("How much money do I have left?", "Is the right amount left in my account?"),
    ("Am I on the right track with my savings?", "Is my savings plan on track?"),
]


def test_words_that_only_look_like_a_direction() -> None:
    def poles(text: str) -> set[str]:
        return {v for v in extract_entities(text).get("polarity", ()) if v.startswith("antonym_")}

    assert poles("How do I send money with Western Union?") == set()  # a name, not a side
    assert poles("How do I cash in my card rewards?") == set()  # cashed in or out alike
    assert poles("Which way is the money going?") == set()
    assert poles("Do prices go up in winter?") == {"antonym_level:+"}  # the control


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_opposite_poles_refuse(a: str, b: str) -> None:
    assert mismatch(a, b) == "polarity", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), SAME)
def test_one_pole_or_none_matches(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


def test_every_antonym_pair_is_a_polarity_pair() -> None:
    assert len({name for name, _, _ in ANTONYMS}) == len(ANTONYMS)
    assert extract_entities("I hate it")["polarity"] == {"positive", "antonym_love:-"}
