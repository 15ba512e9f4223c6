"""Reading "not happy" as "unhappy" (validators/opposites.py ``NOT_PREFIXED``, session 40).

Before, a question whose one negation was "not <word>" was refused against the same
question with the prefixed word ("I'm not happy with my order" / "I'm unhappy with my
order"): one was negative, the other positive. Reading "not happy" as "unhappy" alone
(session 39's trial) made the first positive, and refused it against every other
negative question of its intent; reading it as the "-" pole beside its negation
refused it against "can't see the funds being available" (a trial of this session).
Now the negation stays, and is let pass only against a text that names the same
pair's "-" word; "not happy" is neither pole ("happy" was read as "+" before).
"""

from __future__ import annotations

import pytest

from validators import ENTITIES_VERSION, Entities, compare_entities, extract_entities
from validators.polarity import known_polarity_value


def mismatch(a: str, b: str) -> str | None:
    result = compare_entities(extract_entities(a), extract_entities(b))
    return None if result.matches else result.mismatches[0]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("I'm not happy with my order", "I'm unhappy with my order"),
        ("I am not very happy with the repair", "I'm unhappy with the repair"),
        ("Is it not legal to drive at 16?", "Is it illegal to drive at 16?"),
        ("Why is the app not available?", "Why is the app unavailable?"),
        ("My card isn't valid anymore", "My card is invalid now"),
        ("I'm not satisfied with the service", "I'm dissatisfied with the service"),
        ("Why is my transfer not complete?", "Why is my transfer incomplete?"),
        ("I haven't paid my bill", "My bill is unpaid"),
        ("Is it not safe to swim here?", "Is it unsafe to swim here?"),
        ("这样做不合法吗", "这样做违法吗"),
        ("在中国开这种店不合法吗", "在中国开这种店是非法的吗"),
    ],
)
def test_not_x_meets_its_prefixed_opposite(a: str, b: str) -> None:
    assert mismatch(a, b) is None
    assert mismatch(b, a) is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # the "+" word itself: refused, as before
        ("I'm not happy with my order", "I'm happy with my order"),
        ("Why is the app not available?", "Is the app available?"),
        ("I haven't paid my bill", "I paid my bill"),
        ("这样做不合法吗", "这样做合法吗"),
        ("这样做不合法吗, 我没有执照", "这样做违法吗"),
        # another negation beside the "not X": the texts still differ in it
        ("I'm not happy and I didn't get my order", "I'm unhappy with my order"),
        # the "-" word of another pair does not explain this "not"
        ("I'm not happy with my order", "Is my order unavailable?"),
    ],
)
def test_what_still_refuses(a: str, b: str) -> None:
    assert mismatch(a, b) == "polarity"
    assert mismatch(b, a) == "polarity"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # a "not X" with no "-" word on the other side compares as any negation did
        ("Why is my card not active?", "Why isn't my card working?"),
        ("My top-up funds aren't available yet", "I cannot see the funds being available"),
        ("My top up did not complete", "My top-up has not gone through, is it complete?"),
        # and as before: "not happy" is no "+" pole (it is no "-" pole either)
        ("I'm not happy and didn't get my order", "I'm unhappy, I didn't get my order"),
        ("I'm not happy with my order", "I want to return my order, it did not fit"),
        # left out: "not responsible for" is not "irresponsible", "not limited to" lists
        ("Is the bank not responsible for fraud?", "Why is the bank not liable for fraud?"),
    ],
)
def test_other_negations_compare_as_before(a: str, b: str) -> None:
    assert mismatch(a, b) is None


def test_not_limited_to_and_not_responsible_are_not_prefixed_poles() -> None:
    for text in ("fees including but not limited to wires", "I'm not responsible for it"):
        values = extract_entities(text)["polarity"]
        assert "negative" in values and "negation:prefixed" not in values, values
        assert not any(v.startswith("not:") for v in values), values


def test_the_values_are_known_and_survive_a_round_trip() -> None:
    entities = extract_entities("I'm not happy with my order")
    values = entities["polarity"]
    assert {"negative", "not:prefix_happy", "negation:prefixed"} <= values
    assert not {"prefix_happy:+", "prefix_happy:-"} & values
    assert all(known_polarity_value(v) for v in values), values
    assert not known_polarity_value("not:no_such_pair")
    back = Entities.from_dict(entities.to_dict())
    assert back.to_dict()["_v"] == ENTITIES_VERSION
    assert compare_entities(back, extract_entities("I'm unhappy with my order")).matches
