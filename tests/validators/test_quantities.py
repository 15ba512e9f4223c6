"""Numbers, amounts and percentages: paraphrases agree, changed values refuse."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities

SAME = [
    ("首次开通会员多少钱", "第一次开通会员要多少钱"),  # 第一次 is 首次, no count (session 48)
    # amounts in every spelling
    ("I want to transfer $20", "I'd like to send 20 dollars"),
    ("I want to transfer $20", "I want to transfer 20 USD"),
    ("I want to transfer $20", "I want to transfer USD 20"),
    ("Can I withdraw $20.00?", "Can I withdraw twenty bucks?"),
    ("Is there a fee on €5 top ups?", "Is there a fee on 5 euros top ups?"),
    ("How do I pay £1,000?", "How do I pay 1000 pounds?"),
    ("转账100元要手续费吗", "转账100块要手续费吗"),
    ("转账一百元要手续费吗", "转账100块钱要手续费吗"),
    ("转账5万元要多久", "转账50000元要多久"),
    ("¥100 is enough?", "￥100 is enough?"),
    ("is 50 cents the fee", "is $0.50 the fee"),
    # percentages
    ("Is the rate 5%?", "Is the rate 5 percent?"),
    ("Is the rate 5%?", "Is the rate five per cent?"),
    ("利率是百分之五吗", "利率是5%吗"),
    ("利率涨了3个百分点吗", "利率涨了3%吗"),
    # plain numbers
    ("Can I have 3 cards?", "Can I have three cards?"),
    ("我可以办三张卡吗", "我可以办3张卡吗"),
    ("Can I have 3 cards?", "我可以办三张卡吗"),
    ("I have 1 card", "I have one card"),
    ("set a 10 minute timer", "set a ten minute timer"),
    ("How do I get a new one?", "How do I get a new card?"),
    ("我想查一下余额", "我想查询余额"),
    ("我想办一张信用卡", "我想办信用卡"),
    ("请给我一个建议", "请给我建议"),
    ("十分感谢，怎么查余额", "非常感谢，怎么查余额"),
    ("二维码付款怎么用", "扫码付款怎么用"),
    # currencies named without an amount, and ordinals
    ("exchange rate between us dollars and euros", "exchange rate between usd and eur"),
    ("美元兑欧元汇率", "exchange rate from USD to EUR"),
    ("Can I get a second card?", "Can I get a 2nd card?"),
    ("I was charged twice", "I was charged two times"),
    ("At first it worked, now it fails", "It worked, now it fails"),
    ("wait a second, where is my card", "where is my card"),
    # "more than one" is "multiple", no count (session 51)
    ("Can I hold more than one currency?", "Can I hold multiple currencies?"),
    ("can i take more than one carry on", "how many carry ons am i allowed"),
    ("不止一件商品可以一起退吗", "多件商品可以一起退吗"),
]

DIFFERENT = [
    ("I want to transfer $20", "I want to transfer $25", "amount"),
    ("I want to transfer $20", "I want to transfer €20", "amount"),
    ("I want to transfer 20 dollars", "I want to transfer 20 euros", "amount"),
    ("Can I withdraw $20?", "Can I withdraw 20?", "amount"),  # a small number: a count
    ("Can I withdraw $20?", "Can I withdraw 25?", "amount"),
    ("转账100元要手续费吗", "转账200元要手续费吗", "amount"),
    ("转账100元要手续费吗", "转账100美元要手续费吗", "amount"),
    ("¥100 is enough?", "100元 is enough?", "amount"),
    ("Is the rate 5%?", "Is the rate 6%?", "percentage"),
    ("利率是百分之五吗", "利率是百分之六吗", "percentage"),
    ("Is the rate 5%?", "Is the rate 5?", "percentage"),
    ("Can I have 3 cards?", "Can I have 4 cards?", "number"),
    ("Can I have three cards?", "Can I have four cards?", "number"),
    ("我可以办三张卡吗", "我可以办两张卡吗", "number"),
    ("我可以办一张卡吗", "我可以办两张卡吗", "number"),
    ("set a 10 minute timer", "set a 15 minute timer", "number"),
    ("I have 1 card", "I have 2 cards", "number"),
    ("can one of them be removed", "can two of them be removed", "number"),
    ("can one of them be removed", "can they be removed", "number"),
    ("pay 3.5 units", "pay 3.6 units", "number"),
    ("pay 1,234 units", "pay 1,243 units", "number"),
    ("which is the 1st step", "which is the 2nd step", "number"),
    ("第一步是什么", "第二步是什么", "number"),
    ("is 4g supported", "is 5g supported", "number"),
    ("exchange rate between usd and eur", "exchange rate between usd and gbp", "currency"),
    ("convert usd to eur", "convert eur to usd", "currency"),
    ("美元兑人民币汇率", "美元兑日元汇率", "currency"),
    ("convert 200 us dollars to british pounds", "convert 200 us dollars to euros", "currency"),
    ("What was my first transaction?", "What was my second transaction?", "number"),
    ("I was charged twice", "I was charged three times", "number"),
    ("第一次转账", "第二次转账", "number"),
    ("首次转账", "第三次转账", "number"),  # the first time against the third: a number still
    ("Can I have one card?", "Can I have more than one card?", "number"),
    ("Can I have two cards?", "Can I have more than one card?", "number"),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_paraphrases_agree(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b", "kind"), DIFFERENT)
def test_changed_values_refuse_on_their_kind(a: str, b: str, kind: str) -> None:
    assert mismatch(a, b) == kind, (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(
    ("text", "kind", "values"),
    [
        ("send $20 and €5", "amount", {"USD:20", "EUR:5"}),
        ("HK$ 300 or C$40", "amount", {"HKD:300", "CAD:40"}),
        ("twenty dollars", "amount", {"USD:20"}),
        ("one hundred and twenty dollars", "amount", {"USD:120"}),
        ("$5k", "amount", {"USD:5000"}),
        ("2 million dollars", "amount", {"USD:2000000"}),
        ("RMB 100", "amount", {"CNY:100"}),
        ("一百块钱", "amount", {"CNY:100"}),
        ("5毛钱", "amount", {"CNY:0.5"}),
        ("百分之百", "percentage", {"100"}),
        ("twenty-five", "number", {"25"}),
        ("两万", "number", {"20000"}),
        ("japanese yen", "currency", {"JPY"}),
        ("usd to eur", "currency", {"USD", "EUR", "order:USD>EUR"}),
        ("人民币", "currency", {"CNY"}),
        ("I try to learn php", "currency", set()),
    ],
)
def test_canonical_values(text: str, kind: str, values: set[str]) -> None:
    assert extract_entities(text).values_of(kind) == values


def test_numbers_inside_specific_entities_are_not_also_numbers() -> None:
    for text in ("$20", "order 12345", "iOS 10", "3pm", "5%", "2024-03-05", "+1 555-123-4567"):
        assert "number" not in extract_entities(text), text


def test_long_digit_runs_and_codes_are_identifiers() -> None:
    assert extract_entities("my account 12345678")["identifier"] == {"12345678"}
    assert extract_entities("is 12345678 valid")["identifier"] == {"12345678"}
    assert extract_entities("do I need form w2")["identifier"] == {"W2"}
