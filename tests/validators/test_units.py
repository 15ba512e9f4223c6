"""Units (``validators.units``): two units of one dimension refuse; a unit named on
one side only, or the same unit in other words, is served."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities
from validators.units import compare_units

DIFFERENT = [
    ("How tall is Mount Everest in meters?", "How tall is Mount Everest in feet?"),
    ("How many days does a refund take?", "How many hours does a refund take?"),
    ("How many days does a refund take?", "How many weeks does a refund take?"),
    ("How long does shipping take in days?", "How long does shipping take in hours?"),
    (
        "What is the boiling point of water in Celsius?",
        "What is the boiling point of water in Fahrenheit?",
    ),
    ("How do I convert Celsius to Fahrenheit?", "How do I convert Fahrenheit to Celsius?"),
    ("How many feet are in a mile?", "How many miles are in a foot?"),
    ("Is a 5 km run long?", "Is a 5 mile run long?"),
    ("What is the monthly fee?", "What is the annual fee?"),
    ("How much data is a 2 GB plan?", "How much data is a 2 MB plan?"),
    # two dimensions, one conversion (session 39: served each other's answers before)
    ("How many ounces in a cup?", "How many cups in an ounce?"),
    ("How many calories in a gram of fat?", "How many grams of fat in a calorie?"),
    ("How many km in a mile?", "How many miles in a km?"),
    # "km/h" is a speed, not "km" (a length against "mph" on one side: session 44)
    ("What is the speed limit on highways in mph?", "What is the speed limit on highways in km/h?"),
    # Chinese durations and frequencies (session 44: Chinese had no unit)
    ("保修期是两年吗", "保修期是两个月吗"),
    ("退款需要3天吗", "退款需要3小时吗"),
    ("每周的限额是多少", "每月的限额是多少"),
    ("一年会员费多少", "一个月会员费多少"),
    # Chinese measures after a number (a pack / a carton, a jin / a kilogram)
    ("一包烟多少钱", "一条烟多少钱"),
    ("一斤多少钱", "一公斤多少钱"),
    ("5公里有多远", "5英里有多远"),
]

SAME = [
    ("How tall is Mount Everest?", "How tall is Mount Everest in meters?"),
    ("How tall is Mount Everest in meters?", "What is Mount Everest's height in metres?"),
    ("How many days does a refund take?", "In how many days will I get my refund?"),
    ("How many days does a refund take?", "How long does a refund take?"),
    ("What is the monthly fee?", "What is the fee per month?"),
    ("It's been a week and my card has not arrived", "My card has not arrived yet"),
    ("Is a 5 km run long?", "Is a 5 kilometre run long?"),
    # no unit: "5G", "the 1990s"
    ("Does my phone support 5G?", "Does my phone support 5G networks?"),
    # an abbreviation after "how many" / "in a" is the unit its word is
    ("How many km in a mile?", "How many kilometers are in a mile?"),
    ("how many mb in a gb", "how many megabytes are in a gigabyte"),
    ("How many ounces are in a cup?", "How many ounces does a cup hold?"),
    ("How many calories should I eat per day?", "How many calories a day should I eat?"),
    ("Can I drive 100 km/h there?", "Can I drive 100 kilometers per hour there?"),
    ("Is 50 km/hr fast for a bike?", "Is 50 kph fast for a bike?"),
    ("保修期是两年吗", "保修期有两年吗"),
    ("退款需要3天吗", "退款要3天吗"),
    # a year, a date, a weekday, a grade: no duration
    ("2023年通胀是多少", "二〇二三年通胀是多少"),
    ("2003 年他搬去了伦敦", "他 2003 年搬去了伦敦"),
    ("3月有活动吗", "三月有活动吗"),
    ("周一开门吗", "星期一开门吗"),
    ("一年级的课本在哪买", "哪里买一年级课本"),
    ("一瓶水多少钱", "一瓶矿泉水多少钱"),
    ("大米多少钱一斤", "一斤大米多少钱"),
    ("我有一个问题", "我有个问题"),  # 个 is any object's: no measure
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_another_unit_of_the_same_dimension_refuses(a: str, b: str) -> None:
    assert mismatch(a, b) == "unit", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_unit_or_a_one_sided_one_matches(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


def test_unit_values() -> None:
    assert extract_entities("How tall is it in meters?")["unit"] == {"length:m"}
    assert extract_entities("a fee per month")["unit"] == {"frequency:month"}
    assert extract_entities("How many feet in a meter?")["unit"] == {
        "length:ft", "length:m", "order:length:ft>m"
    }  # fmt: skip
    # a time unit is read only where it is asked for or counted
    assert "unit" not in extract_entities("It's been a week since I ordered")
    assert "unit" not in extract_entities("What did people do in the 1990s?")


def test_only_a_dimension_named_on_both_sides_is_compared() -> None:
    assert compare_units({"length:m"}, {"time:day"})
    assert compare_units({"length:m", "time:day"}, {"time:day"})
    assert not compare_units({"length:m"}, {"length:ft"})
    assert not compare_units(
        {"length:m", "length:ft", "order:length:m>ft"},
        {"length:m", "length:ft", "order:length:ft>m"},
    )
