"""Bad input is refused with typed errors by every public entry point."""

from __future__ import annotations

import pytest

from validators import (
    GUARDS,
    MAX_TEXT_CHARS,
    EmptyTextError,
    InvalidTextError,
    InvalidUTF8Error,
    TextTooLongError,
    TextTypeError,
    Validator,
    ValidatorError,
    extract_entities,
    find_entities,
    first_guard,
    prepare,
)

BAD = [
    ("", EmptyTextError),
    ("   \n\t ", EmptyTextError),
    (None, TextTypeError),
    (42, TextTypeError),
    (["order 12345"], TextTypeError),
    (b"\xff\xfe order", InvalidUTF8Error),
    (b"\xc3\x28", InvalidUTF8Error),
    ("lone surrogate \udcff", InvalidUTF8Error),
    ("x" * (MAX_TEXT_CHARS + 1), TextTooLongError),
]


@pytest.mark.parametrize(("text", "error"), BAD)
def test_bad_input_is_a_typed_error_everywhere(text: object, error: type[Exception]) -> None:
    calls = [
        lambda: prepare(text),
        lambda: extract_entities(text),
        lambda: find_entities(text),
        lambda: GUARDS["personalized"].check(text),
        lambda: first_guard(text, ["time_sensitive"]),
        lambda: Validator().extract(text),
        lambda: Validator().guard(text, ["high_risk"]),
        lambda: Validator().check(text, "cached question", None, 0.9),
        lambda: Validator().check("new question", text, None, 0.9),
    ]
    for call in calls:
        with pytest.raises(error) as info:
            call()
        assert isinstance(info.value, InvalidTextError)
        assert isinstance(info.value, ValidatorError)
        assert isinstance(info.value, ValueError)


def test_type_error_is_also_a_type_error() -> None:
    with pytest.raises(TypeError):
        extract_entities(3.5)


def test_limit_is_inclusive_and_documented() -> None:
    assert MAX_TEXT_CHARS == 100_000
    text = "order 12345 " + "a" * (MAX_TEXT_CHARS - 12)
    assert len(text) == MAX_TEXT_CHARS
    assert extract_entities(text)["identifier"] == {"12345"}
    with pytest.raises(TextTooLongError, match="100000"):
        extract_entities(text + "a")


def test_utf8_bytes_are_accepted() -> None:
    assert extract_entities("订单号12345".encode()) == extract_entities("订单号12345")


def test_normalization_folds_full_width_forms() -> None:
    assert prepare("１２３％") == "123%"
    assert extract_entities("转账１００元") == extract_entities("转账100元")
    assert prepare("don’t") == "don't"
    assert "\x00" not in prepare("a\x00b")


@pytest.mark.parametrize("unit", ["1,", "one ", "一", "$1 "])
def test_adversarial_input_is_scanned_in_linear_time(unit: str) -> None:
    """A quadratic pattern takes tens of seconds on these 12k-character inputs;
    the linear scanner takes well under a second (the bound is loose on purpose)."""
    import time

    text = unit * (12_000 // len(unit))
    start = time.perf_counter()
    extract_entities(text)
    first_guard(text, list(GUARDS))
    assert time.perf_counter() - start < 5.0


def test_traditional_chinese_is_folded_one_character_for_one() -> None:
    assert prepare("後天天氣如何") == "后天天气如何"
    assert prepare("現在幾點") == "现在几点"
    assert prepare("下週 這個月 餘額 匯率 股價") == "下周 这个月 余额 汇率 股价"
    text = "我應該吃什麼藥"
    assert len(prepare(text)) == len(text)
    assert prepare(text, fold_traditional=False) == text
    # formal numerals are left as they are (參 is also 參加), and read as numbers
    assert prepare("參佰") == "參佰"
    assert extract_entities("轉賬貳佰元") == extract_entities("转账贰佰元")


def test_lone_formal_numerals_are_words() -> None:
    assert "number" not in extract_entities("怎么登陆")
    assert "number" not in extract_entities("我想參加活動")
    assert "number" not in extract_entities("收拾房间")
    assert extract_entities("陸佰元")["amount"] == {"CNY:600"}
