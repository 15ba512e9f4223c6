"""Who acts on whom (``validators.parties``): the asker doing an act to someone against
someone doing it to the asker. A hunt of session 46 found such pairs served for each
other at verifier scores above 0.98 with no entity to stop them. Each refusal comes
with paraphrases that must still be served: the same direction in other words, a text
read both ways or neither way."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities

DIFFERENT = [
    ("Can I send money to a friend?", "Can a friend send money to me?"),
    ("How do I block someone?", "What happens if someone blocks me?"),
    ("Can I invite a friend to my plan?", "Can a friend invite me to their plan?"),
    ("How can I transfer $200 to my son?", "Can my son transfer $200 to me?"),
    ("Can I share my subscription with my wife?", "Can my wife share her subscription with me?"),
    ("How do I add a contact?", "Someone added me as a contact, who is it?"),
]

SAME = [
    ("Can I send money to a friend?", "How do I transfer money to my friend?"),
    ("Can a friend send money to me?", "Is it possible for my friend to send me money?"),
    ("How do I block someone?", "Is there a way to block a user?"),
    ("Can I invite a friend?", "How do I invite friends?"),
    # read both ways: no contrast
    ("I want my friend to send me money", "Can a friend send money to me?"),
    ("Can I send money to a friend?", "How do I send money?"),  # no party: no direction
    # the diff review: converse acts, an act "from" a party, the US
    ("I lent money to my friend, he won't pay it back", "My friend owes me and won't pay"),
    ("How do I request money from a friend?", "How do I get a friend to pay me?"),
    ("Can I transfer points from my friend to my account?", "Can my friend give me points?"),
    ("How do I stop people from messaging me?", "How do I block messages from other users?"),
    ("Can my family send money to the US?", "Can I send money to my family in the US?"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_the_asker_acting_is_not_the_asker_acted_on(a: str, b: str) -> None:
    assert mismatch(a, b) == "polarity", (extract_entities(a), extract_entities(b))
    assert mismatch(a, a) is None  # the control: the same question again


@pytest.mark.parametrize(("a", "b"), SAME)
def test_one_direction_in_other_words_is_served(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


def test_the_asker_receiving_is_not_read_as_acting() -> None:
    # zh_written_questions' receiving_money intent: read as the asker acting, it was
    # refused against "If someone sends me money, …" of the same intent
    for text in (
        "How can I receive transfers from other people?",
        "Can I get payments from friends?",
    ):
        assert not any(
            v.startswith("party_agent") for v in extract_entities(text).values_of("polarity")
        ), text
    control = extract_entities("Can I make transfers to other people?").values_of("polarity")
    assert "party_agent:+" in control
