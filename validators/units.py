"""Units of measure: the unit a question asks its answer in.

Kind ``unit``: ``dimension:unit`` for each unit named, ``length:m`` for "meters",
"metres", "m" (after a number), ``time:day`` for "days", ``frequency:month`` for
"monthly", "per month", "every month". When two or more units of one dimension are
named, ``order:length:ft>m`` records the order ("how many feet in a meter" is not
"how many meters in a foot"), as ``currency`` does; units of two or more dimensions
other than time and frequency, ``order:cross:oz>cup`` ("how many ounces in a cup" is
not "how many cups in an ounce": session 38's review found them served each other's
answers).

What is read:

* a unit word after a number, in any dimension ("5 km", "10 days", "3 lbs"); the
  number itself is the ``number`` kind, so "5 km" vs "5 miles" refuses on ``unit``;
* a bare unit word of length, mass, volume, temperature, speed, data size or energy
  anywhere ("How tall is Everest in meters?", "… in feet?"); one-letter
  abbreviations (``km``, ``lbs``, ``hrs``) only after a number, or after "in", "to", "per",
  "how many";
* a bare time unit only where it is asked for: "how many days", "number of weeks",
  "in hours", "to minutes" ("It's been a week and my card hasn't come" is no unit);
* a frequency: daily, weekly, monthly, quarterly, yearly, annual(ly), per/every/each
  + a time unit. One-letter abbreviations (``m``, ``g``, ``s``) are never read: "5G",
  "the 1990s", "$5m" are no units.

**Rule** (:func:`compare_units`). A dimension named on both sides must name the same
units (in the same order); a dimension named on one side only matches ("How tall is
Everest?" ≈ "How tall is Everest in meters?": the unit only shapes the answer when
another one is asked for). Currencies are ``currency`` / ``amount`` and run first.
"""

from __future__ import annotations

import re
from collections.abc import Set

from validators.scan import MASK, Scanner

_I = re.IGNORECASE
_P = "(?:s|es)?"  # a plural

# canonical unit → (dimension, word forms, abbreviations read only after a number or "in")
_UNITS: dict[str, tuple[str, str, str]] = {
    "mm": ("length", rf"millimet(?:er|re){_P}", "mm"),
    "cm": ("length", rf"centimet(?:er|re){_P}", "cm"),
    "km": ("length", rf"kilomet(?:er|re){_P}", "km|kms"),
    "m": ("length", rf"met(?:er|re){_P}", ""),
    "in": ("length", r"inch(?:es)?", ""),
    "ft": ("length", r"foot|feet", "ft"),
    "yd": ("length", rf"yard{_P}", "yd|yds"),
    "mi": ("length", rf"mile{_P}", "mi"),
    "mg": ("mass", rf"milligram(?:me)?{_P}", "mg"),
    "kg": ("mass", rf"kilogram(?:me)?{_P}|kilos?", "kg|kgs"),
    "g": ("mass", rf"gram(?:me)?{_P}", ""),
    "lb": ("mass", "", "lb|lbs"),
    "oz": ("mass", rf"ounce{_P}", "oz"),
    "t": ("mass", rf"tonne{_P}|metric\stons?", ""),
    "ml": ("volume", rf"millilit(?:er|re){_P}", "ml"),
    "l": ("volume", rf"lit(?:er|re){_P}", ""),
    "gal": ("volume", rf"gallon{_P}", "gal"),
    "qt": ("volume", rf"quart{_P}", "qt"),
    "pt": ("volume", rf"pint{_P}", "pt"),
    "cup": ("volume", rf"cup{_P}", ""),
    "tbsp": ("volume", rf"tablespoon{_P}", "tbsp"),
    "tsp": ("volume", rf"teaspoon{_P}", "tsp"),
    "c": ("temperature", r"celsius|centigrade|°\s?c", ""),
    "f": ("temperature", r"fahrenheit|°\s?f", ""),
    "k": ("temperature", r"kelvin", ""),
    "mph": ("speed", r"miles\sper\shour", "mph"),
    "kmh": ("speed", r"kilomet(?:er|re)s\sper\shour", "kph|km/hr|km/h|kmh"),
    "kb": ("data", rf"kilobyte{_P}", "kb"),
    "mb": ("data", rf"megabyte{_P}", "mb"),
    "gb": ("data", rf"gigabyte{_P}", "gb"),
    "tb": ("data", rf"terabyte{_P}", "tb"),
    "kcal": ("energy", rf"(?:kilo)?calorie{_P}", "kcal|cal"),
    "kwh": ("energy", rf"kilowatt[\s-]hour{_P}", "kwh"),
    "s": ("time", rf"second{_P}", "sec|secs"),
    "min": ("time", rf"minute{_P}", "min|mins"),
    "h": ("time", rf"hour{_P}", "hr|hrs"),
    "day": ("time", rf"day{_P}", ""),
    "week": ("time", rf"week{_P}", "wk|wks"),
    "month": ("time", rf"month{_P}", ""),
    "year": ("time", rf"year{_P}", "yr|yrs"),
}  # fmt: skip
_FREQUENCY = {
    "daily": "day", "weekly": "week", "monthly": "month", "quarterly": "quarter",
    "yearly": "year", "annual": "year", "annually": "year", "hourly": "h",
}  # fmt: skip


def _alternatives(forms: dict[str, str]) -> str:
    return "|".join(f"(?P<{key}>{form})" for key, form in forms.items() if form)


# group names: "u_<unit>" for words, "a_<unit>" for abbreviations
_WORDS = {f"u_{k}": words for k, (_, words, _) in _UNITS.items()}
_ABBREVS = {f"a_{k}": abbrevs for k, (_, _, abbrevs) in _UNITS.items()}
_TIME_WORDS = {k: v for k, v in _WORDS.items() if _UNITS[k[2:]][0] == "time"}
_OTHER_WORDS = {k: v for k, v in _WORDS.items() if _UNITS[k[2:]][0] != "time"}
_B = r"(?<![A-Za-z0-9_])"
# not "km" of "km/h" (a speed read as a length met "mph" on one side only: session 44)
_E = r"(?![A-Za-z0-9_]|/[A-Za-z])"
# After a number (masked by the number extractors) or a digit: any unit, abbreviations too.
AFTER_NUMBER = re.compile(
    rf"(?<=[{MASK}\d])\s?(?:{_alternatives(_WORDS)}|{_alternatives(_ABBREVS)}){_E}", _I
)
#: Every unit's word forms and abbreviations outside time, as one alternation without
#: groups (a guard reads "convert miles to km" as a conversion, "convert PDF to Word"
#: as none).
UNIT_WORDS = "|".join(
    forms
    for unit, (dimension, words, abbrevs) in _UNITS.items()
    if dimension != "time"
    for forms in (words, abbrevs)
    if forms
)
# Bare words outside time, and multi-letter abbreviations after "in"/"to"/"per".
BARE = re.compile(rf"{_B}(?:{_alternatives(_OTHER_WORDS)}){_E}", _I)
_LONG_ABBREVS = {k: v for k, v in _ABBREVS.items() if v and _UNITS[k[2:]][0] != "time"}
# "how many km in a mile" asks what "how many kilometers are in a mile" asks
ASKED_ABBREV = re.compile(
    rf"{_B}(?:in|into|to|per|how\smany)\s(?:an?\s|one\s)?(?:{_alternatives(_LONG_ABBREVS)}){_E}", _I
)
FREQUENCY = re.compile(
    rf"{_B}(?:(?P<f_adj>{'|'.join(_FREQUENCY)})"
    rf"|(?P<per>per|every|each)\s(?:{_alternatives(_TIME_WORDS)})){_E}",
    _I,
)
# A time unit being asked for: "how many (business) days", "number of weeks", "in hours".
ASKED_TIME = re.compile(
    rf"{_B}(?:how\smany|number\sof|in|into|to)\s(?:an?\s)?(?:(?:business|working|calendar|whole)\s)?"
    rf"(?:{_alternatives(_TIME_WORDS)}){_E}",
    _I,
)


# Chinese durations and frequencies: 两年 / 两个月, 3天 / 3个工作日, 每周 / 每月 (session
# 44: Chinese had no unit, and 保修期是两年吗 was served the answer of 两个月; a month
# takes 个, since 3月 is March, a date). Only after a number: 今天, 周一, 星期天 are none.
_ZH_TIME = {
    "年": "year", "月": "month", "星期": "week", "周": "week", "礼拜": "week", "天": "day",
    "工作日": "day", "小时": "h", "钟头": "h", "分钟": "min", "秒": "s",
}  # fmt: skip
ZH_DURATION = re.compile(
    rf"(?<=[{MASK}\d一二两三四五六七八九十百几半])\s?"
    r"(?:个多?(月|星期|礼拜|小时|钟头|工作日)|多?(周|天|小时|分钟|秒)"
    # not a year's 年 (2023年: the ``year`` kind), nor 一年级 (a school grade)
    rf"|(?<![{MASK}\d]{{4}})(?<![{MASK}\d]{{4}}\s)多?(年)(?![级龄代纪]))"
)
ZH_FREQUENCY = re.compile(r"每(?:个)?(天|日|周|星期|礼拜|月|年|小时)")
# Chinese measures after a number: containers (一包 / 一条烟 is a pack / a carton, 一瓶 /
# 一箱水; session 44's review), mass, volume and length (一斤 / 一公斤, 5公里 / 5英里).
# Not 个 (any object), nor 米 without a number (大米 is rice).
_ZH_MEASURES = {
    "包": "count:pack", "条": "count:tiao", "盒": "count:box", "箱": "count:case",
    "瓶": "count:bottle", "杯": "count:cup", "壶": "count:pot", "打": "count:dozen",
    "袋": "count:bag", "罐": "count:can", "桶": "count:barrel",
    "斤": "mass:jin", "公斤": "mass:kg", "千克": "mass:kg", "克": "mass:g", "吨": "mass:t",
    "升": "volume:l", "毫升": "volume:ml", "公里": "length:km", "千米": "length:km",
    "厘米": "length:cm", "毫米": "length:mm", "米": "length:m", "英里": "length:mi",
}  # fmt: skip
ZH_MEASURE = re.compile(
    rf"(?<=[{MASK}\d一二两三四五六七八九十百几半])\s?"
    r"(公斤|千克|毫升|公里|千米|厘米|毫米|英里|包|条|盒|箱|瓶|杯|壶|打|袋|罐|桶|斤|克|吨|升|米)"
)


def _zh_duration(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("unit", "time:" + _ZH_TIME[m.group(1) or m.group(2) or m.group(3)])]


def _zh_measure(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("unit", _ZH_MEASURES[m.group(1)])]


def _zh_frequency(m: re.Match[str]) -> list[tuple[str, str]]:
    word = "天" if m.group(1) == "日" else m.group(1)
    return [("unit", "frequency:" + _ZH_TIME[word])]


def _unit(m: re.Match[str]) -> list[tuple[str, str]] | None:
    groups = m.groupdict()
    if groups.get("f_adj"):
        return [("unit", "frequency:" + _FREQUENCY[groups["f_adj"].lower()])]
    key = next((k for k, v in groups.items() if v and k[:2] in ("u_", "a_")), None)
    if key is None:
        return None
    unit = key[2:]
    dimension = "frequency" if groups.get("per") else _UNITS[unit][0]
    return [("unit", f"{dimension}:{unit}")]


def extract_units(scan: Scanner) -> None:
    """Frequencies first ("per hour" is no time asked for), then units after numbers,
    then bare words and asked-for time units."""
    scan.take(FREQUENCY, _unit)
    scan.take(ZH_FREQUENCY, _zh_frequency)
    scan.take(AFTER_NUMBER, _unit)
    scan.take(ZH_DURATION, _zh_duration)
    scan.take(ZH_MEASURE, _zh_measure)
    scan.take(ASKED_ABBREV, _unit)
    scan.take(BARE, _unit)
    scan.take(ASKED_TIME, _unit)


def unit_values(spans: list[tuple[int, str]]) -> set[str]:
    """The ``unit`` values of ``(position, value)`` spans: the units, and per dimension
    with two or more units the order they were named in."""
    ordered = [v for _, v in sorted(spans)]
    values = set(ordered)
    by_dimension: dict[str, list[str]] = {}
    for value in dict.fromkeys(ordered):
        dimension, _, unit = value.partition(":")
        by_dimension.setdefault(dimension, []).append(unit)
    for dimension, units in by_dimension.items():
        if len(units) > 1:
            values.add(f"order:{dimension}:{'>'.join(units)}")
    # "how many ounces in a cup" / "how many cups in an ounce": two dimensions (an ounce is
    # mass here, a fluid ounce in the kitchen), one conversion, two directions
    measured = [u for d, units in by_dimension.items() if d not in _UNMEASURED for u in units]
    if len(by_dimension.keys() - _UNMEASURED) > 1:
        values.add(f"order:{CROSS}:{'>'.join(measured)}")
    return values


#: dimensions a question names beside what it converts ("calories per day")
_UNMEASURED = frozenset({"time", "frequency"})
#: the dimension of an order across dimensions (``order:cross:oz>cup``)
CROSS = "cross"


def _by_dimension(values: Set[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for value in values:
        dimension = value.removeprefix("order:").partition(":")[0]
        out.setdefault(dimension, set()).add(value)
    return out


def compare_units(left: Set[str], right: Set[str]) -> bool:
    """True when every dimension named on both sides names the same units."""
    a, b = _by_dimension(left), _by_dimension(right)
    return all(a[d] == b[d] for d in a.keys() & b.keys())
