"""Value tokens and value substitution of the semantic-cache pairs (bench/semantic_pairs.py).

:func:`value_tokens` is the positive rule (same-intent pairs count as positives
only when their numbers, amounts, currencies, dates, weekdays, months, relative
days and am/pm agree); it is deliberately independent of the ``validators``
package. :func:`substitute_value` builds the entity negatives: a question with
exactly one value replaced by a different one of the same kind.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

# -- value tokens (the positive rule, independent of validators/) ---------------------

_NUMBER_WORDS = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
    "million": 1000000, "dozen": 12, "half": 0.5, "twice": 2, "double": 2, "triple": 3,
}  # fmt: skip
# "one" is left out on purpose: it is mostly a pronoun ("get a new one").
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# "may" is left out: it is mostly the verb.
_MONTHS = ("january", "february", "march", "april", "june", "july", "august", "september",
           "october", "november", "december")  # fmt: skip
_MONTH_ABBR = {"jan": "january", "feb": "february", "apr": "april", "jun": "june",
               "jul": "july", "aug": "august", "sep": "september", "sept": "september",
               "oct": "october", "nov": "november", "dec": "december"}  # fmt: skip
_RELATIVE = {
    "today": "rel:0", "tonight": "rel:0", "tomorrow": "rel:+1", "yesterday": "rel:-1",
    "next week": "week:+1", "last week": "week:-1", "this week": "week:0",
    "next month": "month:+1", "last month": "month:-1", "this month": "month:0",
}  # fmt: skip
_CURRENCIES = {"$": "usd", "usd": "usd", "dollar": "usd", "dollars": "usd", "buck": "usd",
               "bucks": "usd", "£": "gbp", "gbp": "gbp", "pound": "gbp", "pounds": "gbp",
               "€": "eur", "eur": "eur", "euro": "eur", "euros": "eur"}  # fmt: skip

_W = r"(?<![A-Za-z])"
_E = r"(?![A-Za-z])"
_TOKEN_RE = re.compile(
    r"(?P<num>\d[\d,]*(?:\.\d+)?)"
    rf"|{_W}(?P<word>{'|'.join(_NUMBER_WORDS)}){_E}"
    rf"|{_W}(?P<dow>{'|'.join(_WEEKDAYS)})s?{_E}"
    rf"|{_W}(?P<month>{'|'.join(_MONTHS)}|{'|'.join(_MONTH_ABBR)}){_E}"
    rf"|{_W}(?P<rel>{'|'.join(sorted(_RELATIVE, key=len, reverse=True))}){_E}"
    rf"|(?P<cur>[$£€])|{_W}(?P<curw>{'|'.join(k for k in _CURRENCIES if k.isalpha())}){_E}",
    re.IGNORECASE,
)
_AMPM_RE = re.compile(r"\d\s?([ap])\.?m\.?(?![A-Za-z])", re.IGNORECASE)


def _canonical_number(raw: str) -> str:
    try:
        value = Decimal(raw.replace(",", ""))
    except InvalidOperation:
        return raw
    return format(value.normalize(), "f")


def value_tokens(text: str) -> frozenset[str]:
    """The values a question's answer may depend on, in a canonical form:
    numbers (digits and number words, so "two" == "2"), currencies, weekdays,
    months, relative days/weeks/months and am/pm. Positives must agree on them."""
    out: set[str] = set()
    for m in _TOKEN_RE.finditer(text):
        if m["num"]:
            out.add("n:" + _canonical_number(m["num"].rstrip(",")))
        elif m["word"]:
            out.add("n:" + _canonical_number(str(_NUMBER_WORDS[m["word"].lower()])))
        elif m["dow"]:
            out.add("dow:" + m["dow"].lower())
        elif m["month"]:
            word = m["month"].lower()
            out.add("month:" + _MONTH_ABBR.get(word, word))
        elif m["rel"]:
            out.add(_RELATIVE[re.sub(r"\s+", " ", m["rel"].lower())])
        else:
            out.add("cur:" + _CURRENCIES[(m["cur"] or m["curw"]).lower()])
    out.update("ampm:" + m[1].lower() for m in _AMPM_RE.finditer(text))
    return frozenset(out)


# -- value substitution (entity negatives) ------------------------------------------------


@dataclass(frozen=True)
class Substitution:
    kind: str
    old: str
    new: str
    start: int
    end: int


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _other(rng: random.Random, choices: Sequence[Any], old: Any) -> Any:
    return rng.choice([c for c in choices if c != old])


def _new_number(raw: str, rng: random.Random) -> str:
    """A different, plausible number written like ``raw`` (commas, decimals kept)."""
    clean = raw.replace(",", "")
    whole, _, frac = clean.partition(".")
    value = int(whole) if whole else 0
    if value <= 12:
        new = _other(rng, range(1, 13), value)
    else:
        new = value
        while new == value:
            new = max(1, round(value * rng.choice((0.5, 1.5, 2, 3, 5))))
    text = f"{new:,}" if "," in raw else str(new)
    return f"{text}.{frac}" if frac else text


def _sub_time(m: re.Match[str], rng: random.Random) -> str:
    raw = m["hour"] or m["hour2"]
    new = _other(rng, range(1, 13), int(raw))
    return f"{new}{m.group(0)[len(raw) :]}"


def _sub_ordinal(m: re.Match[str], rng: random.Random) -> str:
    return _ordinal(_other(rng, range(1, 29), int(m["day"])))


def _sub_slash_date(m: re.Match[str], rng: random.Random) -> str:
    day = _other(rng, range(1, 29), int(m["b"]))
    return f"{m['a']}/{day}{m['c'] or ''}"


def _sub_year(m: re.Match[str], rng: random.Random) -> str:
    return str(int(m.group(0)) + rng.choice((-3, -2, -1, 1, 2, 3)))


def _sub_amount(m: re.Match[str], rng: random.Random) -> str:
    raw = m["v1"] or m["v2"]
    start = (m.start("v1") if m["v1"] else m.start("v2")) - m.start()
    whole = m.group(0)
    return whole[:start] + _new_number(raw, rng) + whole[start + len(raw) :]


def _sub_identifier(m: re.Match[str], rng: random.Random) -> str:
    digits = m.group(0)
    tail = digits[-2:]
    new_tail = tail
    while new_tail == tail:
        new_tail = f"{rng.randrange(100):02d}"
    return digits[:-2] + new_tail


def _sub_number(m: re.Match[str], rng: random.Random) -> str:
    return _new_number(m.group(0), rng)


def _keep_case(old: str, new: str) -> str:
    if old.isupper() and len(old) > 1:
        return new.upper()
    return new.capitalize() if old[:1].isupper() else new


_SUB_WORDS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
              "eleven", "twelve", "fifteen", "twenty", "thirty", "forty", "fifty")  # fmt: skip


def _sub_word(choices: Sequence[str]) -> Callable[[re.Match[str], random.Random], str]:
    def sub(m: re.Match[str], rng: random.Random) -> str:
        old = m.group(0)
        return _keep_case(old, _other(rng, choices, old.lower()))

    return sub


_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"

_Sub = Callable[[re.Match[str], random.Random], str]
_SUBSTITUTIONS: tuple[tuple[str, re.Pattern[str], _Sub], ...] = (
    ("time", re.compile(r"(?<![\d:.])(?P<hour>\d{1,2})(?::[0-5]\d)?\s?(?:[ap]\.?m\.?)(?![A-Za-z])"
                        r"|(?<![\d:.])(?P<hour2>\d{1,2}):[0-5]\d(?![\d:])", re.I), _sub_time),
    ("slash_date", re.compile(r"(?<![\d/])(?P<a>\d{1,2})/(?P<b>\d{1,2})(?P<c>/\d{2,4})?(?![\d/])"),
     _sub_slash_date),
    ("ordinal_day", re.compile(r"(?<![\d.,])(?P<day>[1-9]|[12]\d|3[01])(?:st|nd|rd|th)(?![A-Za-z])",
                               re.I), _sub_ordinal),
    ("amount", re.compile(rf"[$£€]\s?(?P<v1>{_NUM})(?![\d,]|\.\d)"
                          rf"|(?<![\w.,-])(?P<v2>{_NUM})\s?(?:dollars?|bucks|pounds?"
                          r"|euros?|usd|gbp|eur|[$£€])(?![A-Za-z])", re.I), _sub_amount),
    ("year", re.compile(r"(?<![\w.,-])(?:19[5-9]\d|20[0-3]\d)(?![\w/:-]|[.,]\d)"), _sub_year),
    ("identifier", re.compile(r"(?<![\w.,-])\d{5,}(?![\w/:-]|[.,]\d)"), _sub_identifier),
    ("number", re.compile(rf"(?<![\w.,/:-])(?:{_NUM})(?![\w/:-]|[.,]\d)"), _sub_number),
    ("number_word", re.compile(rf"{_W}(?:{'|'.join(_SUB_WORDS)}){_E}", re.I),
     _sub_word(_SUB_WORDS)),
    ("weekday", re.compile(rf"{_W}(?:{'|'.join(_WEEKDAYS)}){_E}", re.I), _sub_word(_WEEKDAYS)),
    ("month", re.compile(rf"{_W}(?:{'|'.join(_MONTHS)}){_E}", re.I), _sub_word(_MONTHS)),
    ("relative_day", re.compile(rf"{_W}(?:today|tomorrow|yesterday){_E}", re.I),
     _sub_word(("today", "tomorrow", "yesterday"))),
    ("relative_week", re.compile(rf"{_W}(?:next|last|this) week{_E}", re.I),
     _sub_word(("next week", "last week", "this week"))),
)  # fmt: skip


def value_spans(text: str) -> list[tuple[str, int, int, re.Match[str]]]:
    """Substitutable values in ``text``, most specific kind first, non-overlapping."""
    taken: list[tuple[int, int]] = []
    spans = []
    for kind, pattern, _ in _SUBSTITUTIONS:
        for m in pattern.finditer(text):
            start, end = m.span()
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            spans.append((kind, start, end, m))
    return sorted(spans, key=lambda s: s[1])


def substitute_value(text: str, rng: random.Random, tries: int = 8) -> Substitution | None:
    """Replace one value of ``text`` (chosen with ``rng``) by a different one of the
    same kind, so that :func:`value_tokens` differ. ``None`` when there is none."""
    spans = value_spans(text)
    if not spans:
        return None
    rng.shuffle(spans)
    before = value_tokens(text)
    subs = {kind: sub for kind, _, sub in _SUBSTITUTIONS}
    for kind, start, end, m in spans:
        for _ in range(tries):
            new = subs[kind](m, rng)
            candidate = text[:start] + new + text[end:]
            if new != m.group(0) and value_tokens(candidate) != before:
                return Substitution(kind, m.group(0), new, start, end)
    return None


def apply(text: str, sub: Substitution) -> str:
    return text[: sub.start] + sub.new + text[sub.end :]
