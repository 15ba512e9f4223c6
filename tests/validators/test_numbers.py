from __future__ import annotations

from decimal import Decimal

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities
from validators.numbers import canonical_number, parse_en_words, parse_number, parse_zh


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3", "3"), ("3.0", "3"), ("3.50", "3.5"), ("1,234", "1234"), ("1,234.56", "1234.56"),
        ("5k", "5000"), ("2 million", "2000000"), ("1.5万", "15000"), ("3千", "3000"),
        ("three", "3"), ("twenty-five", "25"), ("twenty five", "25"),
        ("one hundred and five", "105"), ("a thousand", "1000"),
        ("two thousand three hundred", "2300"),
        ("a dozen", "12"), ("zero", "0"),
        ("三", "3"), ("十", "10"), ("十五", "15"), ("二十五", "25"), ("一百零五", "105"),
        ("两千五百", "2500"), ("两万", "20000"), ("一亿二千万", "120000000"),
        ("一万二", "12000"), ("三百五", "350"), ("两千五", "2500"), ("二〇二三", "2023"),
        ("零", "0"), ("壹佰", "100"),
    ],
)  # fmt: skip
def test_parse_number(text: str, value: str) -> None:
    parsed = parse_number(text)
    assert parsed is not None
    assert canonical_number(parsed) == value


def test_three_forms_are_one_value() -> None:
    values = {canonical_number(parse_number(t) or Decimal(-1)) for t in ("3", "three", "三", "叁")}
    assert values == {"3"}


def test_word_runs_that_break_the_grammar_are_several_numbers() -> None:
    assert parse_en_words("one two") == [1, 2]
    assert parse_en_words("five and six") == [5, 6]
    assert parse_en_words("twenty twenty") == [20, 20]


def test_malformed_chinese_runs_are_rejected() -> None:
    assert parse_zh("十二三") is None
    assert parse_zh("") is None
    assert parse_number("") is None


def test_canonical_number_never_uses_exponents() -> None:
    assert canonical_number(Decimal("1E+3")) == "1000"
    assert canonical_number(Decimal("0.50")) == "0.5"


# -- magnitudes, signs, leading dots, exponents, hex, traditional numerals ----------------

NUMBER_FORMS_SAME = [
    ("Can I send $5M abroad?", "Can I send $5 million abroad?"),
    ("Can I send $5MM abroad?", "Can I send $5,000,000 abroad?"),
    ("Can I send $5m abroad?", "Can I send 5 million dollars abroad?"),
    ("Can I send $5B abroad?", "Can I send $5 billion abroad?"),
    ("a 5 mil dollar loan", "a 5 million dollar loan"),
    ("a 5 mn loan", "a 5,000,000 loan"),
    ("3 trillion in debt", "three trillion in debt"),
    ("a loan of 5 crore", "a loan of 50,000,000"),
    ("a loan of 5 lakh", "a loan of 500,000"),
    ("how long is a 5m pool", "how long is a 5 m pool"),  # metres, not millions
    ("is -40 the same in C and F", "is −40 the same in C and F"),
    ("symptoms of COVID-19", "symptoms of COVID19"),
    ("what is 5-10 of 100", "what is 5 - 10 of 100"),
    ("call 555-1234", "call 555 1234"),
    ("what is .5 of 10", "what is 0.5 of 10"),
    ("what is 1e3 squared", "what is 1000 squared"),
    ("error 0x80070005", "error 0x80070005 again"),
    ("转账貳佰元", "转账贰佰元"),
    ("转账參佰元", "转账三百元"),
    ("转账叄佰元", "转账叁佰元"),
    ("转账陸佰元", "转账六百元"),
]
NUMBER_FORMS_DIFFERENT = [
    ("Can I send $5M abroad?", "Can I send $5 abroad?"),
    ("Can I send $5M abroad?", "Can I send $5B abroad?"),
    ("a 5 mil dollar loan", "a 5 dollar loan"),
    ("3 trillion in debt", "3 billion in debt"),
    ("a loan of 5 crore", "a loan of 5 lakh"),
    ("a loan of 5 lakh", "a loan of 5"),
    ("temperature at -40 degrees", "temperature at 40 degrees"),
    ("temperature at −40 degrees", "temperature at 40 degrees"),
    ("what is (-3) squared", "what is (3) squared"),
    ("what is .5 of 10", "what is .7 of 10"),
    ("what is .5 of 10", "what is 5 of 10"),
    ("what is 1e3", "what is 1e6"),
    ("How do I fix error 0x80070005?", "How do I fix error 0x80070002?"),
    ("转账貳佰元", "转账壹佰元"),
    ("转账陸佰元", "转账壹佰元"),
    ("转账參佰元", "转账壹佰元"),
]


@pytest.mark.parametrize(("a", "b"), NUMBER_FORMS_SAME)
def test_number_forms_of_one_value_agree(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), NUMBER_FORMS_DIFFERENT)
def test_number_forms_of_different_values_refuse(a: str, b: str) -> None:
    assert mismatch(a, b) is not None, (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("-40", "-40"), ("−40", "-40"), (".5", "0.5"), ("1e3", "1000"), ("2.5e-1", "0.25"),
        ("5 crore", "50000000"), ("5 lakh", "500000"), ("3 trillion", "3000000000000"),
        ("5 mn", "5000000"), ("5 mil", "5000000"), ("貳佰", "200"), ("參拾", "30"),
        ("叄", "3"), ("陸仟", "6000"),
    ],
)  # fmt: skip
def test_parse_number_forms(text: str, value: str) -> None:
    parsed = parse_number(text)
    assert parsed is not None
    assert canonical_number(parsed) == value


def test_a_sign_only_at_a_word_start() -> None:
    assert extract_entities("what is COVID-19")["identifier"] == {"COVID19"}
    assert extract_entities("A-1 sauce")["number"] == {"1"}
    assert extract_entities("5-10 days")["number"] == {"5", "10"}
    assert extract_entities("on 2020-01-05")["date"] == {"2020-01-05"}
    assert extract_entities("at -40 degrees")["number"] == {"-40"}
