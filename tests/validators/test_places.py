"""Places in any case (validators/places.py): lower-case countries and states, and the
acronyms US (in capitals) / UK / EU, as polarity values refused only when both texts
name places and not the same ones; one place in other spellings is one value."""

from __future__ import annotations

import pytest

from validators import compare_entities, extract_entities
from validators.places import find_places


def same_answer(a: str, b: str) -> bool:
    return compare_entities(extract_entities(a), extract_entities(b)).matches


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("how long does a divorce take in england?", "how long does a divorce take in scotland?"),
        ("statute of limitations for fraud in ontario?", "statute of limitations in quebec?"),
        ("What is the legal drinking age in the US?", "What is the legal drinking age in the UK?"),
        ("Does the policy apply to stores in the EU?", "Does it apply to stores in the US?"),
        ("do i need a visa for japan", "do i need a visa for mexico"),
        ("sales tax in new york", "sales tax in new jersey"),
    ],
)
def test_another_place_is_refused(a: str, b: str) -> None:
    assert not same_answer(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("do you ship to canada", "Do you ship to Canada?"),
        ("How do I get to New York?", "how do i get to new york"),
        ("Can I use my card in the U.S.?", "Can I use my card in the USA?"),
        ("Drinking age in the US?", "Drinking age in the United States?"),
        ("Can you help us?", "Can you help me?"),  # "us", the pronoun
        ("Do you ship to the Netherlands?", "do you ship to holland"),
        ("the role of the federal reserve in the u.s. economy", "its role in the U.S. economy"),
        # one-sided: BANKING77 labels them one intent
        ("When can I expect my card? I live in the US.", "When can I expect my card?"),
    ],
)
def test_one_place_in_other_spellings_is_one_name(a: str, b: str) -> None:
    assert same_answer(a, b)


def test_found_places_carry_their_ids_and_spans() -> None:
    text = "Flights from New York to the UK"
    assert [(p, text[s:e]) for p, s, e in find_places(text)] == [
        ("new york", "New York"),
        ("uk", "UK"),
    ]
