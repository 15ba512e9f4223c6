"""Number parsing: digits, English number words and Chinese numerals.

Every numeric entity (amounts, percentages, times, dates, plain numbers) is
canonicalized through ``canonical_number`` so that ``"3"``, ``"3.0"``,
``"three"`` and ``"三"`` all become ``"3"``, ``"1,234"`` and ``"一千二百三十四"``
become ``"1234"``, ``"5k"``, ``"5 crore"`` and ``"5万"``'s digits are multiplied out
(and ``"$5M"``'s: a bare M/MM/B is a magnitude only after a currency symbol). A sign
at a word start is kept (``"-40"``, ``"−40"`` → ``"-40"``), as are a leading dot
(``".5"``) and an exponent (``"1e3"`` → ``"1000"``).

The regex fragments (``DIGIT_NUM``, ``EN_NUM``, ``ZH_NUM``, ``ANY_NUM``) have no
capture groups, so other modules can embed them inside their own groups. Each
can start only at the beginning of a run (a lookbehind) or is bounded (at most
ten English number words, sixteen Chinese numerals), so a pattern that embeds
one and then fails scans each run once, not once per character: the extractor
stays linear on adversarial 100k-character inputs.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

EN_UNITS: dict[str, int] = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19,
}  # fmt: skip
EN_TENS: dict[str, int] = {
    "twenty": 20, "thirty": 30, "forty": 40, "fourty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
EN_SCALES: dict[str, int] = {
    "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000,
    "trillion": 1_000_000_000_000,
}  # fmt: skip
_EN_WORD = "|".join(
    sorted([*EN_UNITS, *EN_TENS, *EN_SCALES, "hundred", "dozen"], key=len, reverse=True)
)

# Multiplier words after digits (5k, 2 million, 3 trillion, 5 mn, 5 crore, 5 lakh).
_SCALE_WORDS = r"k|thousand|million|billion|trillion|bn|mn|mln|mil|crores?|lakhs?|lacs?"
# A sign only at a word start (start, space, bracket, "=" before it): "-40", "(−3)";
# never "COVID-19", "A-1", "5-10", "555-1234", which have a letter or digit before it.
_SIGN = r"(?:(?<![^\s(\[{=:;,])[-\u2212](?=\.?\d))?"
# Digits: 1234, 1,234, 3.5, .5, 1e3, optionally followed by a multiplier (5k, 2 million, 3万).
DIGIT_NUM = (
    _SIGN + r"(?<![A-Za-z0-9_.])(?:(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)"
    r"(?:e[+-]?\d{1,3}(?![A-Za-z0-9]))?"
    rf"(?:\s?(?:{_SCALE_WORDS})(?![A-Za-z])|[百千万萬亿億](?![分]))?"
)
# After a currency symbol a bare letter is a magnitude too: $5M, $5m, $5MM, $5B.
SYMBOL_SCALE = r"(?:(?<=\d)(?:mm|m|b)(?![A-Za-z]))?"
# English number words: "three", "twenty-five", "one hundred and five", "a thousand".
EN_NUM = (
    rf"(?<![A-Za-z])(?:an?\s+(?=(?:hundred|thousand|million|billion|dozen)(?![A-Za-z])))?"
    rf"(?:{_EN_WORD})(?:(?:\s+and\s+|\s*-\s*|\s+)(?:{_EN_WORD})){{0,9}}(?![A-Za-z])"
)
ZH_DIGITS: dict[str, int] = {
    "零": 0, "〇": 0, "一": 1, "壹": 1, "二": 2, "贰": 2, "貳": 2, "两": 2, "兩": 2, "三": 3,
    "叁": 3, "參": 3, "叄": 3, "四": 4, "肆": 4, "五": 5, "伍": 5, "六": 6, "陆": 6, "陸": 6,
    "七": 7, "柒": 7, "八": 8, "捌": 8, "九": 9, "玖": 9,
}  # fmt: skip
ZH_SMALL_UNITS: dict[str, int] = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
ZH_BIG_UNITS: dict[str, int] = {"万": 10_000, "萬": 10_000, "亿": 100_000_000, "億": 100_000_000}
_ZH_CHARS = "".join([*ZH_DIGITS, *ZH_SMALL_UNITS, *ZH_BIG_UNITS])
ZH_NUM = rf"(?<![{_ZH_CHARS}])[{_ZH_CHARS}]{{1,16}}"
ANY_NUM = rf"(?:{DIGIT_NUM}|{EN_NUM}|{ZH_NUM})"

_DIGIT_RE = re.compile(
    r"([-\u2212])?((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(e[+-]?\d{1,3})?"
    rf"\s?({_SCALE_WORDS}|mm|m|b|[百千万萬亿億])?",
    re.IGNORECASE,
)
_MULTIPLIERS = {
    "k": 1_000, "thousand": 1_000, "million": 1_000_000, "m": 1_000_000, "mm": 1_000_000,
    "mn": 1_000_000, "mln": 1_000_000, "mil": 1_000_000, "billion": 1_000_000_000,
    "bn": 1_000_000_000, "b": 1_000_000_000, "trillion": 1_000_000_000_000,
    "lakh": 100_000, "lakhs": 100_000, "lac": 100_000, "lacs": 100_000,
    "crore": 10_000_000, "crores": 10_000_000, "百": 100, "千": 1_000, "万": 10_000,
    "萬": 10_000, "亿": 100_000_000, "億": 100_000_000,
}  # fmt: skip


def canonical_number(value: Decimal) -> str:
    """``Decimal("20.00")`` → ``"20"``, ``Decimal("3.50")`` → ``"3.5"`` (never exponent form)."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def parse_digits(text: str) -> Decimal | None:
    """``"1,234.5"`` → 1234.5, ``"5k"`` → 5000, ``"1.5万"`` → 15000."""
    m = _DIGIT_RE.fullmatch(text.strip())
    if m is None:
        return None
    try:
        value = Decimal(m.group(2).replace(",", "") + (m.group(3) or ""))
    except InvalidOperation:  # pragma: no cover - the regex only admits digits
        return None
    if m.group(4):
        value *= _MULTIPLIERS[m.group(4).lower()]
    return -value if m.group(1) else value


def parse_en_words(text: str) -> list[Decimal]:
    """Parse a run of English number words; a run that breaks the grammar
    ("one two", "five and six") yields several numbers."""
    words = re.findall(r"[a-z]+", text.lower())
    out: list[Decimal] = []
    total = current = 0
    last = ""  # class of the previous word
    started = False

    def flush() -> None:
        nonlocal total, current, started, last
        if started:
            out.append(Decimal(total + current))
        total = current = 0
        started = False
        last = ""

    for i, w in enumerate(words):
        if w == "a" or w == "an":
            continue
        if w == "and":
            if last not in ("hundred", "scale"):
                flush()
            continue
        if w in EN_UNITS:
            if last in ("unit", "tens") and not (last == "tens" and 0 < EN_UNITS[w] < 10):
                flush()
            current += EN_UNITS[w]
            last = "unit"
        elif w in EN_TENS:
            if last in ("unit", "tens"):
                flush()
            current += EN_TENS[w]
            last = "tens"
        elif w == "hundred":
            if last == "hundred":
                flush()
            current = (current or 1) * 100
            last = "hundred"
        elif w == "dozen":
            current = (current or 1) * 12
            last = "hundred"
        elif w in EN_SCALES:
            if last == "scale" and current == 0 and i > 0:
                flush()
            total += (current or 1) * EN_SCALES[w]
            current = 0
            last = "scale"
        else:  # pragma: no cover - the regex only admits number words
            continue
        started = True
    flush()
    return out


def parse_zh(text: str) -> Decimal | None:
    """``"三"`` → 3, ``"二十五"`` → 25, ``"一百零五"`` → 105, ``"两万"`` → 20000,
    colloquial ``"一万二"`` → 12000 and ``"三百五"`` → 350, digit strings
    ``"二〇二三"`` → 2023. ``None`` for a run that is not a well-formed number."""
    if not text:
        return None
    if all(ch in ZH_DIGITS for ch in text):
        if len(text) == 1:
            return Decimal(ZH_DIGITS[text])
        return Decimal(int("".join(str(ZH_DIGITS[ch]) for ch in text)))
    high = 0  # sections of 亿 and 万 already closed
    section = 0  # the part below the current big unit
    num: int | None = None
    last_unit = 1
    after_zero = False
    for ch in text:
        if ch in ZH_DIGITS:
            d = ZH_DIGITS[ch]
            if d == 0:
                after_zero = True
                continue
            if num is not None:
                return None  # two digits without a unit between them: "十二三"
            num = d
        elif ch in ZH_SMALL_UNITS:
            unit = ZH_SMALL_UNITS[ch]
            if unit >= last_unit and section and last_unit > 1 and num is None:
                return None  # "百百"
            section += (1 if num is None else num) * unit
            num = None
            last_unit = unit
            after_zero = False
        else:
            unit = ZH_BIG_UNITS[ch]
            block = section + (num or 0)
            if block == 0 and high == 0:
                block = 1
            if unit == 100_000_000:
                high = (high + block) * unit
            else:
                high += block * unit
            section = 0
            num = None
            last_unit = unit
            after_zero = False
    if num is not None:
        scale = 1 if after_zero or last_unit == 1 else last_unit // 10
        section += num * scale
    return Decimal(high + section)


def parse_number(text: str) -> Decimal | None:
    """Parse one number written with digits, English words or Chinese numerals."""
    text = text.strip()
    if not text:
        return None
    if text[0].isdigit() or (text[0] in "-\u2212." and len(text) > 1):
        return parse_digits(text)
    if text[0] in ZH_DIGITS or text[0] in ZH_SMALL_UNITS or text[0] in ZH_BIG_UNITS:
        return parse_zh(text)
    values = parse_en_words(text)
    return values[0] if len(values) == 1 else None


def number_values(text: str) -> list[Decimal]:
    """Every number in a matched run (English word runs may hold several)."""
    text = text.strip()
    if text and text[0].isascii() and text[0].isalpha():
        return parse_en_words(text)
    value = parse_number(text)
    return [] if value is None else [value]
