"""Extractors for percentages, amounts of money and plain numbers.

Canonical forms:

* percentage: the number, ``"5"`` for ``5%``, ``5 percent``, ``five per cent``,
  ``百分之五``, ``5个百分点``.
* currency: the code of a currency named without an amount: ``euros``,
  ``GBP``, ``japanese yen``, ``人民币`` → ``EUR``, ``GBP``, ``JPY``, ``CNY``
  ("exchange rate between usd and eur" must not answer "usd and gbp"); with two
  or more, ``order:USD>EUR`` records the order they were named in, because
  "convert usd to eur" is not "convert eur to usd".
* amount: ``CODE:value`` with an ISO-like currency code: ``$20``, ``20 dollars``,
  ``20 USD``, ``twenty bucks`` → ``USD:20``; ``€5`` → ``EUR:5``; ``100元``,
  ``100块``, ``一百块钱`` → ``CNY:100``; ``50 cents`` → ``USD:0.5``. The yen/yuan
  sign ``¥`` is ambiguous and stays ``CNY/JPY:100`` (it matches only another
  ``¥``); ``$`` is read as US dollars.
* number: the canonical decimal (``numbers.canonical_number``) of every number
  no earlier extractor took: digits (``1,234``, ``3.5``, ``5k``, ``1st``),
  English words (``three``, ``twenty-five``), ordinals (``1st``, ``first``,
  ``twice`` → ``1``, ``1``, ``2``), Chinese numerals (``三``, ``两万``, ``第一``).

Two deliberate omissions keep true paraphrases matching: an English ``one``
that reads as a pronoun ("a new one", "which one", "no one", "one another",
"one-time") and a lone Chinese ``一`` ("一个", "一下", "一些", "统一") are not
numbers. ``1`` in digits always is. Digit runs of 7 or more without separators
(account, card, tracking numbers) and letter+digit codes (``dl123``, ``b12``) are
identifiers, not numbers.
"""

from __future__ import annotations

import re
from decimal import Decimal

from validators.numbers import (
    ANY_NUM,
    DIGIT_NUM,
    EN_NUM,
    SYMBOL_SCALE,
    ZH_NUM,
    canonical_number,
    number_values,
    parse_number,
)
from validators.scan import Handler, Scanner, one

_I = re.IGNORECASE

PERCENT = re.compile(
    rf"({DIGIT_NUM}|{EN_NUM})\s?(?:%|percent(?:age\spoints?)?|per\scent|pct)(?![A-Za-z])"
    rf"|百分之\s?({ZH_NUM}|{DIGIT_NUM})"
    rf"|({ZH_NUM}|{DIGIT_NUM})\s?个?百分点"
    r"|(百分百)",
    _I,
)

_SYMBOLS = {
    "us$": "USD", "$": "USD", "c$": "CAD", "ca$": "CAD", "a$": "AUD", "au$": "AUD",
    "hk$": "HKD", "nz$": "NZD", "s$": "SGD", "r$": "BRL", "€": "EUR", "£": "GBP",
    "¥": "CNY/JPY", "₹": "INR", "₩": "KRW", "₽": "RUB", "₺": "TRY", "₪": "ILS", "₱": "PHP",
    "฿": "THB", "₫": "VND",
}  # fmt: skip
_CODES = (
    "usd|eur|gbp|jpy|cny|rmb|cad|aud|hkd|nzd|sgd|inr|krw|chf|sek|nok|dkk|mxn|brl|rub|zar"
    "|aed|thb|php|vnd|btc|eth|ils"
)
_WORDS: dict[str, tuple[str, Decimal]] = {
    "dollar": ("USD", Decimal(1)), "buck": ("USD", Decimal(1)), "us dollar": ("USD", Decimal(1)),
    "american dollar": ("USD", Decimal(1)), "canadian dollar": ("CAD", Decimal(1)),
    "australian dollar": ("AUD", Decimal(1)), "hong kong dollar": ("HKD", Decimal(1)),
    "singapore dollar": ("SGD", Decimal(1)), "euro": ("EUR", Decimal(1)),
    "pound": ("GBP", Decimal(1)), "pound sterling": ("GBP", Decimal(1)),
    "quid": ("GBP", Decimal(1)), "yen": ("JPY", Decimal(1)), "yuan": ("CNY", Decimal(1)),
    "renminbi": ("CNY", Decimal(1)), "rupee": ("INR", Decimal(1)), "franc": ("CHF", Decimal(1)),
    "peso": ("MXN", Decimal(1)), "british pound": ("GBP", Decimal(1)),
    "japanese yen": ("JPY", Decimal(1)), "mexican peso": ("MXN", Decimal(1)),
    "chinese yuan": ("CNY", Decimal(1)), "indian rupee": ("INR", Decimal(1)),
    "swiss franc": ("CHF", Decimal(1)), "ruble": ("RUB", Decimal(1)), "rouble": ("RUB", Decimal(1)),
    "shekel": ("ILS", Decimal(1)), "bitcoin": ("BTC", Decimal(1)), "cent": ("USD", Decimal("0.01")),
    "penny": ("GBP", Decimal("0.01")), "pence": ("GBP", Decimal("0.01")),
    "元": ("CNY", Decimal(1)), "块钱": ("CNY", Decimal(1)), "块": ("CNY", Decimal(1)),
    "圆": ("CNY", Decimal(1)), "人民币": ("CNY", Decimal(1)), "美元": ("USD", Decimal(1)),
    "美金": ("USD", Decimal(1)), "欧元": ("EUR", Decimal(1)), "英镑": ("GBP", Decimal(1)),
    "日元": ("JPY", Decimal(1)), "日币": ("JPY", Decimal(1)), "港币": ("HKD", Decimal(1)),
    "港元": ("HKD", Decimal(1)), "韩元": ("KRW", Decimal(1)), "澳元": ("AUD", Decimal(1)),
    "加元": ("CAD", Decimal(1)), "比特币": ("BTC", Decimal(1)),
    "毛钱": ("CNY", Decimal("0.1")), "毛": ("CNY", Decimal("0.1")),
    "角": ("CNY", Decimal("0.1")),
}  # fmt: skip
_EN_WORDS = "|".join(
    re.escape(w).replace(r"\ ", r"\s") + ("(?:s|es)?" if w != "pence" else "")
    for w in sorted((w for w in _WORDS if w.isascii()), key=len, reverse=True)
)
_ZH_WORDS = "|".join(sorted((w for w in _WORDS if not w.isascii()), key=len, reverse=True))
_SYMBOL_RE = "|".join(re.escape(s) for s in sorted(_SYMBOLS, key=len, reverse=True))
AMOUNT = re.compile(
    # $20, US$ 20, €5.50, ¥100
    rf"(?<![A-Za-z0-9])({_SYMBOL_RE})\s?({DIGIT_NUM}{SYMBOL_SCALE}|{EN_NUM})"
    # USD 20, RMB 100
    rf"|(?<![A-Za-z0-9])({_CODES})\s?({DIGIT_NUM})"
    # 20 dollars, twenty bucks, 20 USD, 100元, 一百块钱, 20$
    rf"|({ANY_NUM})\s?(?:({_EN_WORDS}|{_CODES})(?![A-Za-z])|({_ZH_WORDS})(?!儿)|({_SYMBOL_RE}))",
    _I,
)

# A currency named without an amount ("exchange rate between usd and eur"): the word
# list minus fractions, codes that are also words (php, rub, try) and the generic 元/块.
_NOT_NAMES = {"cent", "penny", "pence", "元", "块钱", "块", "圆", "毛钱", "毛", "角"}
_NAME_WORDS = "|".join(
    re.escape(w).replace(r"\ ", r"\s") + "(?:s|es)?"
    for w in sorted(
        (w for w in _WORDS if w.isascii() and w not in _NOT_NAMES), key=len, reverse=True
    )
)
_NAME_CODES = "|".join(c for c in _CODES.split("|") if c not in ("php", "rub", "try"))
_ZH_NAMES = "|".join(w for w in _WORDS if not w.isascii() and w not in _NOT_NAMES)
CURRENCY = re.compile(
    rf"(?<![A-Za-z])(?:({_NAME_WORDS})|({_NAME_CODES}))(?![A-Za-z])|({_ZH_NAMES})", _I
)

# Chinese words that contain numerals but are not numbers ("万一" = in case, "十分" = very).
ZH_LEXICAL = re.compile(
    r"(?<![零〇一二两三四五六七八九十百千])万一|千万(?=[不别要记小注得])|十分(?!钟)|二维码|第三方"
    r"|三星|百度|百货|百科|老百姓|十足|四川|二手|万能|八卦|一一|五险一金|一卡通|三明治"
)
ORDINAL = re.compile(r"(?<![A-Za-z0-9_.])(\d+)(?:st|nd|rd|th)(?![A-Za-z])", _I)
_ORDINAL_WORDS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "twentieth": 20,
    "thirtieth": 30, "twice": 2, "thrice": 3,
}  # fmt: skip
ORDINAL_WORD = re.compile(rf"(?<![A-Za-z])({'|'.join(_ORDINAL_WORDS)})(?![A-Za-z])", _I)
# idioms where the ordinal is not a position: "at first", "first of all", "wait a second"
ORDINAL_IDIOMS = re.compile(
    r"(?<![A-Za-z])(?:at\sfirst|first\sof\sall|first\sand\sforemost|firstly"
    r"|(?:a|one|just\sa)\ssecond(?=\s?(?:ago|later|[.,!?]|$))|second\sthoughts)(?![A-Za-z])",
    _I,
)
LONG_DIGITS = re.compile(r"(?<![A-Za-z0-9_.,])\d{7,}(?![\d.,]\d)")
ALNUM_CODE = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z]+\d[A-Za-z0-9]*(?![A-Za-z0-9_])")
DIGITS = re.compile(DIGIT_NUM, _I)
EN_WORDS = re.compile(EN_NUM, _I)
ZH_NUMERALS = re.compile(ZH_NUM)

# Words before "one" that make it a pronoun or article ("a new one", "which one").
_ONE_BEFORE = frozenset(
    {
        "a", "an", "the", "this", "that", "these", "those", "which", "what", "each", "every",
        "any", "no", "some", "new", "another", "other", "only", "last", "first", "same", "right",
        "wrong", "old", "little", "big", "such", "whichever", "correct", "next", "current",
        "previous", "different", "particular", "specific", "single", "someone", "anyone",
    }
)  # fmt: skip
_ONE_AFTER = frozenset({"another", "by", "more"})


def _percent(m: re.Match[str]) -> list[tuple[str, str]] | None:
    if m.group(4):
        return [("percentage", "100")]
    value = parse_number(m.group(1) or m.group(2) or m.group(3))
    return None if value is None else [("percentage", canonical_number(value))]


def _amount(m: re.Match[str]) -> list[tuple[str, str]] | None:
    if m.group(1):
        code, scale, number = _SYMBOLS[m.group(1).lower()], Decimal(1), m.group(2)
    elif m.group(3):
        code, scale, number = _code(m.group(3)), Decimal(1), m.group(4)
    else:
        number = m.group(5)
        unit = m.group(6) or m.group(7)
        if unit:
            code, scale = _word_currency(unit)
        else:
            code, scale = _SYMBOLS[m.group(8).lower()], Decimal(1)
    value = parse_number(number)
    if value is None:
        return None
    return [("amount", f"{code}:{canonical_number(value * scale)}")]


def _code(text: str) -> str:
    code = text.upper()
    return "CNY" if code == "RMB" else code


def _word_currency(unit: str) -> tuple[str, Decimal]:
    key = re.sub(r"\s+", " ", unit.lower())
    if key in _WORDS:
        return _WORDS[key]
    for suffix in ("es", "s"):
        if key.endswith(suffix) and key[: -len(suffix)] in _WORDS:
            return _WORDS[key[: -len(suffix)]]
    return _code(key), Decimal(1)


def _currency(m: re.Match[str]) -> list[tuple[str, str]]:
    if m.group(2):
        return [("currency", _code(m.group(2)))]
    return [("currency", _word_currency(m.group(1) or m.group(3))[0])]


def _identifier(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("identifier", m.group().upper())]


def _ordinal(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("number", str(int(m.group(1))))]


def _ordinal_word(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("number", str(_ORDINAL_WORDS[m.group(1).lower()]))]


def _digits(m: re.Match[str]) -> list[tuple[str, str]] | None:
    return one("number", _canonical(parse_number(m.group())))


def _canonical(value: Decimal | None) -> str | None:
    return None if value is None else canonical_number(value)


def _make_en_words(work: str) -> Handler:
    def handler(m: re.Match[str]) -> list[tuple[str, str]] | None:
        if m.group().lower() == "one":
            before = re.findall(r"[A-Za-z]+", work[max(0, m.start() - 30) : m.start()])
            after = re.match(r"\s*([A-Za-z]+|-)", work[m.end() :])
            if before and before[-1].lower() in _ONE_BEFORE:
                return None
            if after and (after.group(1) == "-" or after.group(1).lower() in _ONE_AFTER):
                return None
        return [("number", canonical_number(v)) for v in number_values(m.group())]

    return handler


# Formal (banker's) numerals that are also everyday characters: read only next to
# another numeral ("陆佰", "貳拾") or before a currency word ("陆元", matched earlier).
_FORMAL_ALONE = frozenset("壹贰貳叁參叄肆伍陆陸柒捌玖拾佰仟")


def _zh_numeral(work: str) -> Handler:
    def handler(m: re.Match[str]) -> list[tuple[str, str]] | None:
        if m.group() == "一" and work[max(0, m.start() - 1) : m.start()] != "第":
            return None  # a lone 一 is an article or part of a word
        if m.group() in _FORMAL_ALONE:
            return None  # a lone 陆/拾/參 is a word: 登陆, 大陆, 收拾, 參加
        return one("number", _canonical(parse_number(m.group())))

    return handler


def extract_percentages(scan: Scanner) -> None:
    scan.take(PERCENT, _percent)


def extract_amounts(scan: Scanner) -> None:
    """Amounts, then currencies named without an amount."""
    scan.take(AMOUNT, _amount)
    scan.take(CURRENCY, _currency)


#: "The first time" is an occasion, not a count: 第一次 is 首次, which holds no numeral
#: (session 48: a hunt found 首次登录 / 第一次登录 refused, one side read as the number 1).
#: The first time against every time is the ``occasion`` contrast set; against the second
#: time the other side's number still refuses.
ZH_FIRST = re.compile(r"第一次|第一回|头一次|头一回")


#: "More than one" is "multiple" (no count: "Can I hold more than one currency?" asks
#: "Can I hold multiple currencies?", refused as a number before session 51), as 不止一
#: is 多. Against "one" the other side's count still refuses. ("Charged twice" against
#: "double charged" stays a number: BANKING77 also says "two of the same charges".)
MORE_THAN_ONE = re.compile(r"(?<![A-Za-z])more\sthan\s(?:one|1)(?![A-Za-z0-9])|不止一", _I)


def extract_numbers(scan: Scanner) -> None:
    """Whatever numeric text is left: the last extractor to run."""
    # words for the polarity rules (二手 is second-hand, 第一次 the first time: session 51)
    scan.drop(ZH_LEXICAL, words=True)
    scan.drop(ZH_FIRST, words=True)
    scan.take(LONG_DIGITS, _identifier)
    scan.take(ALNUM_CODE, _identifier)
    scan.take(ORDINAL, _ordinal)
    scan.drop(ORDINAL_IDIOMS)
    scan.drop(MORE_THAN_ONE)
    scan.take(ORDINAL_WORD, _ordinal_word)
    scan.take(DIGITS, _digits)
    scan.take(EN_WORDS, _make_en_words(scan.work))
    scan.take(ZH_NUMERALS, _zh_numeral(scan.work))
