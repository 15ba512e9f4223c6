"""Questions about one thing that ask for different things (``validators.asked_for``),
through the validator's check as a hit meets them: session 49's misfire hunt served
each REFUSED pair at the defaults; each SERVED pair is one intent of BANKING77, CLINC150
or the Chinese question files, or a paraphrase of the hunt's controls."""

from __future__ import annotations

import time

import pytest

from validators.asked_for import asks_for_other, narrows_choice
from validators.verify import Validator, pair_mismatch

REFUSED = [
    ("When is the next bus to the airport?", "Where is the next bus to the airport?"),
    ("Where is the conference held?", "When is the conference held?"),
    ("Where does the shuttle stop?", "When does the shuttle stop?"),
    ("How much is the annual fee?", "When is the annual fee charged?"),
    ("How much is the late fee?", "When is the late fee charged?"),
    ("When is the next train to Boston?", "How much is the next train to Boston?"),
    ("How often are statements sent?", "How many statements are sent?"),
    ("Who is the speaker at the event?", "When is the event?"),
    ("Who pays the closing costs?", "How much are the closing costs?"),
    ("Can you tell me when the store opens?", "Can you tell me where the store is?"),
    ("How long is the flight to Paris?", "Where is the flight to Paris?"),
    ("会议在哪里开？", "会议什么时候开？"),
    ("年终奖什么时候发？", "年终奖发多少？"),
    ("多久可以提现一次？", "一次可以提现多少？"),
    ("考试在哪里？", "考试是什么时候？"),
    ("When's the next bus to the airport?", "Where's the next bus to the airport?"),
    # where it goes, not where it is: no state, so "delivered" makes it no arrival
    ("When are cards delivered?", "Where are cards delivered to?"),
]

SERVED = [
    # one intent in the data sets: a complaint asks why, where and when alike
    ("Why is there an extra fee on my statement?", "Where did the extra fee come from?"),
    ("Where is my new card?", "When will my new card arrive?"),
    ("What does it mean when a cash withdrawal is pending?", "Why is my withdrawal pending?"),
    ("Where can I find your exchange rates?", "How much are the exchange rates?"),
    ("how often should i change my oil", "when should i change my oil"),
    ("how long until i need to change my tires", "how many miles until i change my tires"),
    ("how many vacation days do i have left", "how many days of vacation do i have left"),
    ("who do i report lost luggage to", "where do i report lost luggage"),
    ("How often can I use the free delivery?", "How many times can I use the free delivery?"),
    ("There was a fee charged when I paid with my card.", "Why was I charged a fee?"),
    ("这个药多久吃一次", "这个药隔多久吃"),
    # the diff review's (session 49): where a thing is against when it arrives, Chinese
    # durations, a condition before the question, notice asked as an amount
    ("Where is the refund I requested?", "When will I get the refund I requested?"),
    (
        "I ordered a card last week. Where is it?",
        "I ordered a card last week. When will it arrive?",
    ),
    ("Can you tell me where my card is?", "Can you tell me when my card will arrive?"),
    ("新卡寄到哪里了？", "新卡什么时候寄到？"),
    ("退款到哪里了？", "退款什么时候到账？"),
    ("提现多少天到账？", "提现什么时候到账？"),
    ("贷款几个月能批下来？", "贷款什么时候能批下来？"),
    ("When I travel abroad, are there fees?", "How much are the fees when I travel abroad?"),
    ("How much notice do I need to give before cancelling?", "When do I need to give notice?"),
    ("How much in advance should I book?", "When should I book?"),
    # the same question asked the same way, and what is not a question word
    ("When is rent due?", "What day is rent due?"),
    ("How much is the late fee?", "What is the late fee amount?"),
    ("Who can open a joint account?", "How do I open a joint account?"),
    ("When does the sale end?", "When does the sale start?"),  # the antonym kind's
]


@pytest.mark.parametrize(("a", "b"), REFUSED)
def test_a_question_asking_for_something_else_is_refused(a: str, b: str) -> None:
    assert asks_for_other(a, b) and asks_for_other(b, a)
    assert pair_mismatch(a, b) == ("polarity", "asks_for_other")
    assert Validator().check(a, b, None, 0.99) == "entity_mismatch:polarity"


@pytest.mark.parametrize(("a", "b"), SERVED)
def test_one_question_asked_two_ways_is_not_refused_here(a: str, b: str) -> None:
    assert not asks_for_other(a, b) and not asks_for_other(b, a)


def test_what_a_pair_that_differs_in_more_than_one_word_is() -> None:
    # "How much does the service fee cost?" / "Who charges the service fee?": two words
    # apart besides the question words, left to the verifier (a minimal pair only)
    assert not asks_for_other("How much does the service fee cost?", "Who charges the service fee?")
    assert not asks_for_other("Where is it?", "When is it?")  # nothing in common to ask about
    assert not asks_for_other("When is the bus?", "公交车什么时候来？")  # two languages


def test_a_tenant_comparing_no_polarity_is_not_refused_for_it() -> None:
    a, b = REFUSED[0]
    assert Validator().check(a, b, None, 0.99, kinds=("number", "date")) is None


CHOICE_NARROWED = [
    ("Is it cheaper to fly or drive to Chicago?", "Is it cheaper to drive to Chicago?"),
    ("Do you have vegan or gluten-free options?", "Do you have gluten-free options?"),
    ("Is it better to rent or buy a house?", "Is it better to buy a house?"),
    ("Is coffee or tea healthier?", "Is coffee healthier?"),
]


@pytest.mark.parametrize(("a", "b"), CHOICE_NARROWED)
def test_a_choice_against_one_of_its_options_is_refused(a: str, b: str) -> None:
    assert narrows_choice(a, b) and narrows_choice(b, a)
    assert pair_mismatch(a, b) == ("polarity", "narrows_choice")
    assert Validator().check(a, b, None, 0.99) == "entity_mismatch:polarity"


def test_a_choice_asked_again_or_worded_otherwise_is_not_refused_here() -> None:
    assert not narrows_choice("Is coffee or tea healthier?", "Is coffee or tea healthier?")
    assert not narrows_choice("Can I pay by card or cash?", "Can I pay by card or in cash?")
    assert not narrows_choice("are you real or not", "are you real")  # a tag, no option
    assert not narrows_choice("will my 401k rollover or not", "will my 401k rollover")
    # an "or" between clauses, one wording of one intent (BANKING77's card_linking)
    assert not narrows_choice(
        "Is that something you have to do or can I do that?", "How do I link my new card?"
    )


def test_a_long_text_is_read_in_linear_time() -> None:
    """A text of many greetings and commas (the prefix is tried after each comma): a
    backtracking prefix took seconds at 8,000 characters before the review's fix; the
    bound here is generous, what it guards is the growth."""
    for text in ("hi, " * 25_000, "please," * 14_000, "when, " * 16_000):
        started = time.perf_counter()
        asks_for_other(text + "x", text + "where")
        assert time.perf_counter() - started < 2.0
