"""English questions counting the same nouns with the counts swapped
(``validators.counts``), through the validator's check as a hit meets them."""

from __future__ import annotations

import pytest

from validators.counts import counts, swapped_counts
from validators.verify import Validator

SWAPPED = [
    # the misfire hunt of session 46: served as one question
    ("Can I have two cards on one account?", "Can I have one card on two accounts?"),
    ("Can I link 2 cards to 1 account?", "Can I link 1 card to 2 accounts?"),
    ("Is there a fee for 3 transfers in 1 day?", "Is there a fee for 1 transfer in 3 days?"),
    ("Can two people use one account?", "Can one person use two accounts?"),
    ("I want 2 tickets for 3 nights", "I want 3 tickets for 2 nights"),
    (
        "Do you have a flat with 2 bedrooms and 3 baths?",
        "Do you have a flat with 3 bedrooms and 2 baths?",
    ),
    ("How much for five boxes of ten pens?", "How much for ten boxes of five pens?"),
    # the diff review's: "a single", "only one", "3-day", "IDs", "twenty-five", "buses"
    ("Can I have two cards on a single account?", "Can I have a single card on two accounts?"),
    ("Can I have two cards on only one account?", "Can I have only one card on two accounts?"),
    ("Is there a 3-day hold on 2 checks?", "Is there a 2-day hold on 3 checks?"),
    ("Can I open 2 accounts with 1 ID?", "Can I open 1 account with 2 IDs?"),
    ("Can I add twenty-five users to five teams?", "Can I add five users to twenty-five teams?"),
    ("Can I ride 2 buses on 1 ticket?", "Can I ride 1 bus on 2 tickets?"),
    # session 49's misfire hunt: a modifier on one side (the noun is the phrase's last word)
    ("Can I have two cards on one bank account?", "Can I have one card on two accounts?"),
    ("Can I add two users to one business account?", "Can I add one user to two accounts?"),
    ("Can I use two coupons on one order?", "Can I use one coupon on two online orders?"),
    (
        "Can I register two cars under one insurance policy?",
        "Can I register one car under two policies?",
    ),
    ("Can I bring two carry-on bags for one passenger?", "Can I bring one bag for two passengers?"),
    # the first words swapped where the heads are one noun (PAWS-X)
    (
        "It has six Sydney actors and one Melbourne actor",
        "It has six Melbourne actors and one Sydney actor",
    ),
]

SAME = [
    ("Can I have two cards on one account?", "Can I have 2 cards on 1 account?"),  # digits
    ("Can I have two cards on one account?", "With one account, can I have two cards?"),
    ("Can I have two cards on one account?", "Can I have two card on one account"),
    ("Is it 2 or 3 days?", "Is it 3 or 2 days?"),  # one noun counted: nothing to swap
    ("Which one has 2 bedrooms?", "Does the one with 2 bedrooms cost more?"),
    ("Can I order 2 pizzas?", "Can I order 3 pizzas?"),  # the number kind's, not this one's
    ("Is one of my two cards blocked?", "Is one of my 2 cards blocked?"),  # "one of"
    ("Can 2 people share 2 rooms?", "Can 2 rooms be shared by 2 people?"),  # one number
    # a modifier more or less on one side is the same count (session 49)
    ("Can I have two cards on one bank account?", "Can I have two cards on a single account?"),
    ("Can I use two coupons on one order?", "Can I use 2 discount coupons on 1 order?"),
    ("Is the fee 2 dollars for 1 transfer?", "Is it 1 transfer for 2 dollars?"),
    ("Do I get 1 point for every 2 dollars?", "Is it 2 dollars spent per 1 point earned?"),
    ("It took 3 days for 2 payments to arrive", "2 payments took 3 days to arrive"),
    ("Can I add twenty-five users?", "Can I add twenty five users?"),
]


@pytest.mark.parametrize(("a", "b"), SWAPPED)
def test_the_counts_swapped_are_refused(a: str, b: str) -> None:
    assert swapped_counts(a, b) and swapped_counts(b, a)
    validator = Validator()
    assert validator.check(b, a, validator.extract(a), 0.97) == "entity_mismatch:number"
    # the control: the same question again is served
    assert validator.check(a, a, validator.extract(a), 0.97) is None


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_counts_are_no_swap(a: str, b: str) -> None:
    assert not swapped_counts(a, b) and not swapped_counts(b, a)


def test_what_a_count_is() -> None:
    assert counts("Two cards on one account, 3 days") == [(2, "card"), (1, "account"), (3, "day")]
    assert counts("which one is free? a new one of those") == []  # a pronoun, "one of"
    assert counts("$5 fee, 2.5 hours, 10 boxes") == [(10, "box")]  # amounts and decimals
    assert counts("a 3-day hold, twenty-five users, a single ID") == [
        (3, "day"),
        (25, "user"),
        (1, "id"),
    ]
    assert counts("2 people, 3 children, 4 parties") == [
        (2, "person"),
        (3, "child"),
        (4, "party"),
    ]
    # the noun is the phrase's last word, up to a function word or a participle
    assert counts("two bank accounts on one debit card linked to 3 carry-on bags") == [
        (2, "account"),
        (1, "card"),
        (3, "bag"),
    ]
    assert counts("one card arrived, two cards i have") == [(1, "card"), (2, "card")]


def test_a_tenant_comparing_no_numbers_is_not_refused_for_it() -> None:
    a, b = SWAPPED[0]
    validator = Validator()
    assert validator.check(b, a, validator.extract(a), 0.97, kinds=["polarity"]) is None
