from __future__ import annotations

from decimal import Decimal

import pytest

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
