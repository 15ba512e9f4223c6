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
    # session 48's misfire hunt: served at verifier 0.983-0.997
    ("What is the ticket price per person?", "What is the ticket price per group?"),
    ("Is the entrance fee for individuals?", "Is the entrance fee for groups?"),
    ("How many vouchers can be used per booking?", "How many vouchers per customer?"),
    ("How many devices can stream per account?", "How many devices can stream per profile?"),
    ("Is interest on a savings account taxable?", "Is interest on a checking account taxable?"),
    ("Documents to open a personal bank account?", "Documents to open a business bank account?"),
    ("How do I activate the primary card?", "How do I activate the secondary card?"),
    ("Can I close a joint account online?", "Can I close an individual account online?"),
    ("Can I extend the loan term?", "Can I shorten the loan term?"),
    ("Can I postpone the policy start date?", "Can I bring the policy start date forward?"),
    ("How do I pause my meal kit subscription?", "How do I resume my meal kit subscription?"),
    ("Do I need to verify the first time I log in?", "Do I need to verify every time I log in?"),
    ("个人门票多少钱", "团体门票多少钱"),
    ("个人怎么开发票", "公司怎么开发票"),
    ("个人会员年费多少钱", "家庭会员年费多少钱"),
    ("优惠券每人限用几张", "优惠券每单限用几张"),
    ("主卡怎么激活", "副卡怎么激活"),
    ("怎么寄快递", "怎么收快递"),
    ("快递怎么寄件", "快递怎么取快递"),
    ("首次登录需要验证吗", "每次登录都需要验证吗"),
    # 第一次 holds a numeral: masked from the numbers, it was read by no rule (session 51)
    ("第一次登录需要验证吗", "每次登录都需要验证吗"),
    ("怎么给别人转账", "怎么收别人的转账"),
    ("贷款期限可以延长吗", "贷款期限可以缩短吗"),
    ("会员可以暂停吗", "会员可以恢复吗"),
    # session 49's misfire hunt: served at verifier 0.989-0.996
    (
        "How do I change the email address on the account?",
        "How do I change the mailing address on the account?",
    ),
    ("Where do I update my billing address?", "Where do I update my shipping address?"),
    ("What does the basic plan include?", "What does the pro plan include?"),
    ("基础版多少钱？", "专业版多少钱？"),
    ("怎么修改收货地址", "怎么修改邮箱地址"),
    # session 52's misfire hunt (served at 0.995-0.997): 个人 / 企业贷款, 首次 / 再次申领
    ("个人贷款利率是多少？", "企业贷款利率是多少？"),
    ("首次申领护照需要什么材料？", "再次申领护照需要什么材料？"),
    ("What do I need to apply for the first time?", "What do I need to apply a second time?"),
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
    # session 48: the same member in other words, or one side naming none
    ("What is the price per person?", "How much is it per head?"),
    ("How many coupons per order?", "How many coupons can I use on each order?"),
    ("首次开通会员多少钱", "第一次开通会员要多少钱"),  # 首次 is 第一次
    ("首次办理信用卡需要什么材料", "第一次办信用卡需要哪些材料"),
    ("团体票多少钱", "团体门票价格是多少"),
    ("个人信息怎么修改", "怎么修改个人信息"),
    ("How do I open a savings account?", "How can I open a savings account online?"),
    ("Can I pause my subscription?", "Is it possible to pause my plan?"),
    ("怎么寄快递", "寄快递怎么操作"),
    ("How many disposable cards per account?", "How many disposable cards per person?"),
    ("申请退货后要自己去寄快递吗", "退货可以预约快递上门取件吗"),  # 上门取件: a pickup to send
    ("公司让写绩效自评怎么写", "绩效考核的个人总结写什么"),  # no party asks
    ("tell me the current account balance", "what is my savings account balance"),
    # session 49: the same address or edition in other words, one side naming none
    ("How do I change my home address?", "How do I update my mailing address?"),
    ("What is the price of the premium plan?", "How much is the premium subscription?"),
    ("Is the ad-free plan more expensive?", "How much is the premium tier?"),
    ("How do I change my address?", "How do I change my billing address?"),
    # the diff review's: no order in these sets, "plus" no edition, "mailing" no use
    (
        "How do I upgrade from the free plan to the pro plan?",
        "How do I upgrade to the pro plan from the free plan?",
    ),
    (
        "Can my billing address be different from my shipping address?",
        "Can my shipping address be different from my billing address?",
    ),
    (
        "Does the basic plan include a Disney Plus subscription?",
        "Is a Disney Plus subscription included in the basic plan?",
    ),
    (
        "Can I change the mailing address on my order?",
        "Can I change the shipping address on my order?",
    ),
    ("如何修改邮寄地址？", "如何修改收货地址？"),
    ("怎么从免费版升级到专业版", "专业版怎么从免费版升级"),
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
        # a word after the first member that is not said after the second is no head
        (
            "Does the buyer pay the seller or the bank?",
            "Does the seller pay the buyer or the bank?",
        ),
        ("买家付款给卖家吗", "卖家付款给买家吗"),
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
        # each before the same head (session 51: refused as a role swap before)
        ("成人票和儿童票价格一样吗", "儿童票和成人票价格一样吗"),
        (
            "Are adult tickets and child tickets the same price?",
            "Are child tickets and adult tickets the same price?",
        ),
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
