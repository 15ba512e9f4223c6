"""Chinese questions naming the same two parties of a relation, swapped
(``validators.roles_zh``), through the validator's check as a hit meets them."""

from __future__ import annotations

import pytest

from validators.roles_zh import MAX_SWAP_SPAN, swapped_roles
from validators.verify import Validator

SWAPPED = [
    # a review, session 44: the Chinese verifier served each at 0.993-0.997
    ("父母可以继承子女的遗产吗", "子女可以继承父母的遗产吗"),
    ("公司可以辞退员工吗", "员工可以辞退公司吗"),
    ("他欠我钱怎么办", "我欠他钱怎么办"),
    ("我可以给别人转账吗", "别人可以给我转账吗"),
    ("咖啡比茶健康吗？", "茶比咖啡健康吗？"),
    ("北京比上海大吗", "上海比北京大吗"),
    ("房东可以起诉租客吗", "租客可以起诉房东吗"),
    # one person's act on another (session 47)
    ("我邀请朋友注册有奖励吗", "朋友邀请我注册有奖励吗"),
    ("我拉黑了他会怎么样", "他拉黑了我会怎么样"),
    ("我关注了她会有通知吗", "她关注了我会有通知吗"),
    # what is moved from one to the other (session 52's misfire hunt: served at 0.996)
    ("怎么把微信里的钱转到银行卡？", "怎么把银行卡里的钱转到微信？"),
    ("安卓手机的数据怎么迁移到苹果手机？", "苹果手机的数据怎么迁移到安卓手机？"),
]

SAME = [
    ("咖啡比茶健康吗", "咖啡比茶健康吗？"),  # the same question, punctuated
    ("密码怎么修改", "怎么修改密码"),  # the topic first: no middle, no swap
    ("密码忘了怎么办", "忘了密码怎么办"),
    ("给我打电话", "打电话给我"),  # words that move, no two parties exchanged
    ("咖啡和茶哪个更健康", "茶和咖啡哪个更健康"),  # "and" joins, it relates nothing
    ("咖啡比茶健康吗", "咖啡是不是比茶健康"),  # other characters: not this rule's
    ("怎么邀请朋友", "朋友怎么邀请"),  # one party: nothing to exchange
    ("如何关注公众号", "公众号如何关注"),
    ("怎么把钱转到银行卡", "钱怎么转到银行卡"),  # one party moves: nothing exchanged
    # binding and connecting join both ways (the diff review of session 52)
    ("怎么把手机号绑定到账号", "怎么把账号绑定到手机号"),
    ("怎么把耳机连接到手机", "怎么把手机连接到耳机"),
]


@pytest.mark.parametrize(("a", "b"), SWAPPED)
def test_the_parties_exchanged_are_refused(a: str, b: str) -> None:
    assert swapped_roles(a, b) and swapped_roles(b, a)
    validator = Validator()
    reason = validator.check(b, a, validator.extract(a), 0.97)
    assert reason == "entity_mismatch:polarity"
    # the control: the same question again is served
    assert validator.check(a, a, validator.extract(a), 0.97) is None


@pytest.mark.parametrize(("a", "b"), SAME)
def test_paraphrases_are_no_swap(a: str, b: str) -> None:
    assert not swapped_roles(a, b)


def test_a_tenant_comparing_no_polarity_is_not_refused_for_it() -> None:
    a, b = SWAPPED[0]
    validator = Validator()
    assert validator.check(b, a, validator.extract(a), 0.97, kinds=["number"]) is None


def test_a_swap_longer_than_the_span_is_not_searched() -> None:
    # the search is cubic in the span (a review: 8,000 rearranged characters took 4 s)
    x, y = "甲" * 5, "乙" * 5
    assert swapped_roles(f"{x}比{y}大吗", f"{y}比{x}大吗")  # the positive control
    x, y = "甲" * (MAX_SWAP_SPAN // 2), "乙" * (MAX_SWAP_SPAN // 2)
    assert not swapped_roles(f"{x}比{y}大吗", f"{y}比{x}大吗")
