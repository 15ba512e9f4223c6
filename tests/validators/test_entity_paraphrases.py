"""Everyday paraphrases the entity kinds of session 22 (name, language, unit,
instruction, antonyms, lettered identifiers) must not refuse: a second review found
each of these refused by a first version of the rules (a topic read as a format, an
adverb's position, a bare "uppercase", a "like" inside the question, both poles on
one side, English asked of an English question, a Roman numeral). None is from the
evaluation split. The negative controls beside them still refuse."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities

SAME = [
    ("How do I center a div in HTML?", "how to center a div html"),
    ("How do I add a comment in JSON?", "Can JSON files have comments?"),
    ("How do I decline an invitation politely?", "How to politely decline an invitation?"),
    ("Does my password need an uppercase letter?", "Does my password need a capital letter?"),
    ("Explain why dogs act like wolves", "Why do dogs act like wolves?"),
    ("Describe what it is like to be a pilot", "What is it like being a pilot?"),
    ("How hard is it to learn Python?", "Is Python easy to learn?"),
    ("How many native English speakers are there?", "How many people speak English natively?"),
    ("What does carpe diem mean in English?", "What does carpe diem mean?"),
    ("How do I type with emoji on Windows?", "How to type emoji on Windows?"),
    ("How can I save a DataFrame as CSV?", "How do I export a pandas DataFrame to CSV?"),
    ("Is it bad to drink coffee every day?", "Is drinking coffee daily good or bad for you?"),
    ("How do I make a table in Markdown?", "markdown table syntax"),
    ("Is type II diabetes curable?", "Can type 2 diabetes be cured?"),
    ("How do I convert a string to uppercase in Python?", "Python string to upper case"),
    ("Explain quantum physics like I'm five", "ELI5 quantum physics"),
    # session 38's review: refused by the polarity kind before
    ("订阅怎么取消", "怎么取消订阅"),  # topic first, verb after
    ("自动续费要如何关闭", "如何关闭自动续费"),
    ("怎么退出所有设备的登录", "如何在所有设备上退出登录"),  # a modifier inside
    ("How do I stop auto-renewal?", "How do I turn off automatic renewal?"),
    ("How do I stop email notifications?", "How can I disable email notifications?"),
    ("Do you sell gift cards?", "Can I buy a gift card?"),  # the shop sells, I buy
    # session 44's hunt: refused until session 45
    ("转账1万要手续费吗", "转账一万元要手续费吗"),  # a number that is the other's amount
    ("支付没成功怎么办", "支付失败怎么办"),  # "not succeeded" is "failed"
    ("My payment did not succeed, what now?", "My payment failed, what now?"),
    ("Can I use my card in the US?", "Can I use my card in America?"),
    ("How do I upgrade to Windows 11?", "How do I upgrade to Win 11?"),
    ("How do I cancel my subscription?", "How do I stop my subscription?"),
    ("How do I cancel my subscription?", "How do I end my gym membership?"),
    ("怎么取消订阅", "怎么退订"),
    ("Is the hotel near the airport?", "Is the hotel close to the airport?"),
    # session 46: a minimum age asked as "how old", a time past as "more than … after"
    ("What is the minimum age to open an account?", "How old do I need to be to open an account?"),
    ("How old do you have to be to rent a car?", "What's the minimum age to rent a car?"),
    ("How old must I be to open an account?", "What is the minimum age to open an account?"),
    ("开户最低年龄是多少", "几岁才能开户"),
    ("How old do you have to be?", "What age do you have to be?"),
    ("Is there a minimum age?", "Do you have an age limit?"),
    (
        "Can I return an item after 30 days?",
        "Can I return an item more than 30 days after purchase?",
    ),
    ("How does a borrower repay early?", "Can a borrower pay off the loan early?"),
    ("商家入驻要多少钱", "商家入驻收费标准"),
    ("Can I open an account for my child?", "Can parents open accounts for their children?"),
    ("My card was lost", "My card was stolen"),
    ("七天内可以退货吗", "7天之内能退货吗"),
    (
        "Can I return it more than 30 days after purchase?",
        "Can I return it 30 days after purchase?",
    ),
    (
        "Can I return an item up to 30 days after purchase?",
        "Can I return an item within 30 days of purchase?",
    ),
    (
        "Can I return it no later than 30 days after delivery?",
        "Can I return it within 30 days of delivery?",
    ),
    ("退款几天内到账", "退款几天后到账"),
    ("Is my phone too old to get the update?", "Can my old phone get the update?"),
    ("Can I transfer money to a foreign account?", "Can I send money to an overseas account?"),
    ("可以寄到国外吗", "可以寄往海外吗"),
    ("Do you ship to other countries?", "Do you deliver to other countries?"),
    ("三天后到账吗", "三天以后到账吗"),
    ("收到货七天内可以退吗", "签收后七天内可以退货吗"),
    ("What fees do you charge?", "What fees do you charge customers?"),
    pytest.param(
        "How tall is Mount Everest?",
        "What's the height of Everest in meters?",
        marks=pytest.mark.xfail(strict=True, reason="a multiword name against a part of it"),
    ),
]

DIFFERENT = [
    ("What is the capital of France?", "What is the capital of France? Answer in JSON."),
    ("List the planets.", "List the planets as a table."),
    ("Why is the sky blue?", "Why is the sky blue? Answer in Japanese."),
    ("Is this phone good?", "Is this phone bad?"),
    ("What is type I diabetes?", "What is type II diabetes?"),
    ("Explain how engines work.", "Explain how engines work like I'm a mechanic."),
    ("Translate 'gato' to English.", "Translate 'gato' to French."),
    ("用中文回答：天空为什么是蓝色的？", "用英语回答：天空为什么是蓝色的？"),
    ("怎么订阅", "订阅怎么取消"),  # the reorder keeps a real contrast
    ("Can I sell my gift card?", "Can I buy a gift card?"),
    ("How do I turn on notifications?", "How do I stop notifications?"),
    # the controls of session 45's rules
    ("转账1万要手续费吗", "转账两万元要手续费吗"),
    ("Can I send 500 abroad?", "Can I send $600 abroad?"),
    ("Do orders over 100 items ship free?", "Do orders over $100 ship free?"),
    ("Which is the cheapest hotel?", "Which hotel has the lowest rating?"),
    ("支付没成功怎么办", "支付成功怎么办"),
    ("My payment did not succeed, what now?", "My payment succeeded, what now?"),
    ("Can I use my card in America?", "Can I use my card in South America?"),
    ("Can I use my card in America?", "Can I use my card in Canada?"),
    ("How do I upgrade to Win 10?", "How do I upgrade to Windows 11?"),
    ("How can I win 2 tickets?", "How can I win 3 tickets?"),
    ("How do I start my subscription?", "How do I stop my subscription?"),
    ("Is the park open to the public?", "Is the park closed to the public?"),
    ("What is the most expensive plan?", "What is the lowest priced plan?"),
    # the controls of session 46's rules
    ("Can the lender cancel the loan?", "Can the borrower cancel the loan?"),
    ("七天内可以退货吗", "七天后可以退货吗"),
    # the diff review of session 46
    (
        "Can I return it within 30 days after purchase?",
        "Can I return it more than 30 days after purchase?",
    ),
    ("Can I pay before delivery?", "Can I pay after delivery?"),
    ("可以转账到境外账户吗", "可以从境外账户转账进来吗"),
    ("可以寄到国外吗", "可以从国外寄过来吗"),
    ("Do you ship to other countries?", "Do you ship from other countries?"),
    ("Can I ship to a PO box?", "Can I ship from a PO box?"),
    ("Can I transfer money to a foreign account?", "Can I transfer money from a foreign account?"),
    ("Does the payer pay the transfer fee?", "Does the payee pay the transfer fee?"),
    ("What fees do you charge merchants?", "What fees do you charge customers?"),
    ("你们对商家收什么费用", "你们对顾客收什么费用"),
    ("企业账户怎么开", "个人账户怎么开"),
    ("Can a parent open an account for a child?", "Can a child open an account for a parent?"),
    ("快递丢了怎么办", "快递损坏了怎么办"),
    ("My parcel is lost, what now?", "My parcel is damaged, what now?"),
    ("What is the maximum age to rent a car?", "How old do you have to be to rent a car?"),
    ("开户最高年龄是多少", "几岁才能开户"),
    ("What is the maximum age to rent a car?", "What is the minimum age to rent a car?"),
    ("Can I return an item within 30 days?", "Can I return an item after 30 days?"),
    ("Can I return an item within 30 days?", "Can I return it more than 30 days after purchase?"),
    (
        "Can I return it more than 30 days after purchase?",
        "Can I return it less than 30 days after purchase?",
    ),
    ("Can I withdraw more than $500?", "Can I withdraw $500?"),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_everyday_paraphrases_match(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_the_controls_still_refuse(a: str, b: str) -> None:
    assert mismatch(a, b) is not None, (extract_entities(a), extract_entities(b))
