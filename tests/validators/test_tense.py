"""A yes-no question about a decision already taken against one still ahead
(``validators.tense``): a hunt of session 46 found "have you stopped …" served for
"will you stop …" (and 取消了吗 for 会取消吗). Each refusal comes with the same tense in
other words, and a status asked two ways (no decision), which must still be served."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities

DONE_OR_TO_COME = [
    ("Have you stopped selling gift cards?", "Will you stop selling gift cards?"),
    ("Has the price gone up?", "Will the price go up?"),
    ("Did you discontinue the basic plan?", "Are you going to discontinue the basic plan?"),
    ("Has my subscription been cancelled?", "Will my subscription be cancelled?"),
    ("订阅取消了吗", "订阅会取消吗"),
    ("你们停售了吗", "你们会不会停售"),
    ("会员活动取消了吗", "会员活动会取消吗"),
    ("Hi there, have you stopped selling gift cards?", "Will you stop selling gift cards?"),
]
ONE_TENSE_OR_NONE = [
    ("Have you stopped selling gift cards?", "Did you stop selling gift cards?"),
    ("Will the price go up?", "Is the price going to go up?"),
    ("Has my card arrived?", "When will my card arrive?"),  # a status, not a decision
    ("How do I cancel my subscription?", "Will I be charged if I cancel?"),
    ("订阅取消了吗", "订阅是不是已经取消了"),
    # the diff review: 会 of 会员, a word before 了, 停售 not 停 + 售
    ("会员已经取消了吗", "会员取消成功了吗"),
    ("会员卡停售了吗", "会员卡是不是停售了"),
    ("会议取消了吗", "会议是不是取消了"),
]


@pytest.mark.parametrize(("a", "b"), DONE_OR_TO_COME)
def test_a_decision_done_is_not_one_to_come(a: str, b: str) -> None:
    assert mismatch(a, b) == "polarity", (extract_entities(a), extract_entities(b))
    assert mismatch(b, b) is None


@pytest.mark.parametrize(("a", "b"), ONE_TENSE_OR_NONE)
def test_one_tense_in_other_words_is_served(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))
