"""Contrast sets of a review's and a hiring's roles and of sibling categories
(validators/contrast_roles.py), and the shipper / consignee of a parcel: the families
session 50 left to the verifier, which served them at 0.982-0.996, are refused; the same
member in other words, a text naming none, two members joined in either order and words
that only look like members (after I graduate, 24小时工作, a generic error) are not."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities

REFUSED = [
    ("Can the shipper cancel the shipment?", "Can the consignee cancel the shipment?"),
    ("发货人可以取消订单吗", "收货人可以取消订单吗"),
    ("Can the reviewer see the author's name?", "Can the author see the reviewer's name?"),
    ("What should the interviewer ask first?", "What should the candidate ask first?"),
    ("面试官可以问薪资吗", "求职者可以问薪资吗"),
    ("Is the generic version as effective?", "Is the brand-name version as effective?"),
    ("Are generic drugs covered by my plan?", "Are brand-name drugs covered by my plan?"),
    ("What is the generic name of Advil?", "What is the brand name of Advil?"),
    ("仿制药可以报销吗", "原研药可以报销吗"),
    (
        "What is the tuition for undergraduate students?",
        "What is the tuition for graduate students?",
    ),
    ("How long is a master's program?", "How long is a PhD?"),
    ("本科生的学费是多少", "研究生的学费是多少"),
    ("硕士要读几年", "博士要读几年"),
    ("Do hourly employees get overtime?", "Do salaried employees get overtime?"),
    ("时薪怎么算加班费", "月薪怎么算加班费"),
]

KEPT = [
    # two members joined, in either order
    (
        "Who pays the duties, the shipper or the consignee?",
        "Who pays the duties, the consignee or the shipper?",
    ),
    (
        "Is there a price gap between generic and brand-name drugs?",
        "Why are brand-name drugs dearer than generics?",
    ),
    # the same member in other words
    ("Do PhD students pay tuition?", "Do doctoral students pay tuition?"),
    ("What do recruiters look for?", "What do hiring managers look for?"),
    ("求职者面试要带什么", "应聘者面试需要带什么"),
    ("Do hourly workers get overtime pay?", "Is overtime pay given to hourly staff?"),
    # one side only, or words that name no member
    ("Are generic drugs covered?", "Is my medication covered?"),
    (
        "Can I keep my student account after I graduate?",
        "Can undergraduates open a student account?",
    ),
    ("What does a generic error mean?", "What does a brand-name laptop cost?"),
    ("Who is the author of the privacy policy?", "Who wrote the privacy policy?"),
]


@pytest.mark.parametrize(("a", "b"), REFUSED)
def test_another_role_or_category_is_refused(a: str, b: str) -> None:
    assert mismatch(a, b) == "polarity", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), KEPT)
def test_the_same_role_or_category_or_none_is_kept(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(
    "text",
    [
        "客服是24小时工作吗",  # 小时工 inside 24小时工作
        "What does a generic error mean?",
        "Can I keep my student account after I graduate?",
        "What is the hourly rate for parking?",
    ],
)
def test_words_that_only_look_like_members_name_none(text: str) -> None:
    polarity = extract_entities(text).get("polarity", frozenset())
    assert not any(
        v.startswith(("contrast_pay", "contrast_drug", "contrast_degree")) for v in polarity
    )
