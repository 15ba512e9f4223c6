"""Contrast sets (validators/contrasts.py) and the Chinese antonym poles: a question
about one party, population or kind is not served the answer about another; a text
naming no member, or the same member in other words, is never refused.

The refused pairs are a review's hand-written FAQ pairs (session 38) that the embedder
and the verifier both served (verifier 0.983-0.996); the kept ones are paraphrases of
the same kinds."""

from __future__ import annotations

import pytest

from validators import compare_entities, extract_entities
from validators.contrasts import CONTRAST_SETS, contrast_pairs


def same_answer(a: str, b: str) -> bool:
    return compare_entities(extract_entities(a), extract_entities(b)).matches


REFUSED = [
    ("How does a buyer get a refund?", "How does a seller get a refund?"),
    # session 43's review: served at verifier 0.98-0.99
    (
        "What are the signs of a heart attack in men?",
        "What are the signs of a heart attack in women?",
    ),
    ("男性每天需要多少热量", "女性每天需要多少热量"),
    ("What documents does the tenant need to sign?", "What documents does the landlord sign?"),
    ("How does an employer report a workplace injury?", "How does an employee report one?"),
    ("What is the ticket price for children?", "What is the ticket price for adults?"),
    ("Maximum daily dose of ibuprofen for adults?", "Maximum daily dose of ibuprofen for kids?"),
    ("How much melatonin should a child take?", "How much melatonin should an adult take?"),
    ("How do new customers get the welcome discount?", "How do existing customers get it?"),
    ("What benefits do part-time employees receive?", "What benefits do full-time staff get?"),
    ("Baggage allowance for economy passengers?", "Baggage allowance in business class?"),
    ("Is a double room enough for a family?", "Is a single room enough for a family?"),
    ("How much notice under state law?", "How much notice under federal law?"),
    ("How long does domestic shipping take?", "How long does international shipping take?"),
    ("Can I return online purchases?", "Can I return in-store purchases?"),
    ("Does the mobile app support fingerprint login?", "Does the website support it?"),
    ("How does a patient cancel an appointment?", "How does a doctor cancel an appointment?"),
    ("最便宜的套餐是哪个？", "最贵的套餐是哪个？"),
    ("哪个快递最快？", "哪个快递最慢？"),
    ("房价上涨的原因是什么？", "房价下跌的原因是什么？"),
    ("司机怎么注册？", "乘客怎么注册？"),
    ("患者怎么取消预约？", "医生怎么取消预约？"),
    ("员工离职需要办理哪些手续？", "老板离职需要办理哪些手续？"),
    ("国内运费多少", "国际运费多少"),
    ("经济舱可以带多少行李", "商务舱可以带多少行李"),
]

KEPT = [
    ("How do kids get a discount?", "What discount do children get?"),  # one member
    ("Can I open a bank account for my newborn baby?", "Can I open an account for a child?"),
    ("How do I get a refund?", "How does a buyer get a refund?"),  # one side names none
    ("Can I use the app to pay?", "How do I pay in the mobile app?"),
    ("How long does international shipping take?", "How long does shipping abroad take?"),
    ("Can both the buyer and the seller cancel?", "Can the seller cancel the order?"),
    ("Is premium economy worth it?", "Is premium economy a good deal?"),
    ("How do I change my address?", "How can I update my address?"),
    ("快递多久到", "快递几天能到"),  # 快 inside 快递 is no speed
    ("这个贵宾卡怎么办理", "贵宾卡如何申请"),  # 贵 inside 贵宾 (VIP) is no price
    ("慢性病可以报销吗", "慢性病能报销吗"),
    ("Who hosted the event?", "Who was the host of the event?"),
    ("Where do I enter my driver's license?", "Where do I add my driver's license?"),
    ("Is this toy for boys or girls?", "Is this toy for girls?"),  # both named: no contrast
]


@pytest.mark.parametrize(("a", "b"), REFUSED)
def test_a_different_member_is_refused(a: str, b: str) -> None:
    assert not same_answer(a, b) and not same_answer(b, a)


@pytest.mark.parametrize(("a", "b"), KEPT)
def test_paraphrases_and_one_sided_mentions_are_kept(a: str, b: str) -> None:
    assert same_answer(a, b) and same_answer(b, a)


def test_every_set_has_two_members_and_every_pair_a_name() -> None:
    for name, members in CONTRAST_SETS:
        assert len(members) >= 2, name
        assert len({m for m, _, _ in members}) == len(members), name
    names = [n for n, _, _ in contrast_pairs()]
    assert len(names) == len(set(names))
    assert sum(len(m) * (len(m) - 1) // 2 for _, m in CONTRAST_SETS) == len(names)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "Can a guest check in without the host present?",
            "Can a host check in without the guest?",
        ),
        (
            "How can an instructor reset a student's password?",
            "How can a student reset a teacher's?",
        ),
        ("买家可以给卖家退款吗", "卖家可以给买家退款吗"),
    ],
)
def test_the_same_two_members_in_swapped_roles_are_refused(a: str, b: str) -> None:
    assert not same_answer(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Can a buyer and a seller both cancel?", "Can a seller and a buyer both cancel?"),
        ("What fees do buyers and sellers pay?", "What fees do sellers or buyers pay?"),
        ("买家和卖家都可以取消吗", "卖家和买家都可以取消吗"),
        ("Can the host let the guest in?", "Can a guest be let in by the host?"),  # passive
        ("Can the host let the guest in?", "Can the host let a guest in early?"),
    ],
)
def test_joined_members_and_passives_keep_no_order(a: str, b: str) -> None:
    assert same_answer(a, b)


def test_stored_contrast_and_order_values_read_back() -> None:
    from validators.entity_set import Entities

    for text in ("Can a guest check in without the host present?", "经济舱可以带多少行李"):
        entities = extract_entities(text)
        assert any(v.startswith(("order_", "contrast_")) for v in entities["polarity"])
        assert Entities.from_dict(entities.to_dict()) == entities
