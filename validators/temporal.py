"""Extractors for dates (absolute and relative), times of day and years.

Canonical forms (kind ``date``):

* ``2024-03-05`` full date; ``03-05`` month and day; ``2024-03`` year and month;
  ``month:03`` a month alone; ``day:05`` a day of the month alone (``5号``).
* Slash and dotted dates are read month/day when the first number cannot be a
  day-of-month ambiguity (``3/15`` → ``03-15``, ``15/3`` → ``03-15``); when both
  parts are ≤ 12 and differ (``3/5``) the reading is ambiguous (US March 5,
  elsewhere May 3) and the value is kept as written, ``03/05``, which only
  equals another ``3/5``.
* ``rel:+1`` relative days (tomorrow, 明天), ``rel:-2`` (day before yesterday, 前天).
* ``dow:1`` … ``dow:7`` weekdays (Monday, 周一, 星期一, 礼拜一), with a modifier
  when one is written: ``next:dow:1`` (next Monday, 下周一), ``last:``, ``this:``.
* ``week:+1`` / ``month:-1`` / ``year:0`` / ``quarter:+1`` / ``weekend:+1``
  relative periods (next week, 上个月, 今年, this weekend).

Kind ``time``: ``15:30`` when the hour is certain (``3:30pm``, ``15:30``,
``下午三点半``), ``h12:03:30`` when am/pm is not said (``3:30``, ``three
o'clock``, ``三点半``), and ``period:morning|noon|afternoon|evening|late_night``
for a part of the day said without a clock time (``this afternoon``, ``晚上``).
A period next to a clock time is dropped by the caller (the clock is more
precise). Kind ``year``: four-digit years 1900–2100 (``2023``, ``2023年``,
``二〇二三年``) that no other extractor took.
"""

from __future__ import annotations

import re

from validators.numbers import EN_NUM, ZH_NUM, parse_number
from validators.scan import Scanner

_I = re.IGNORECASE
_A = r"(?<![A-Za-z0-9_])"
_Z = r"(?![A-Za-z0-9_])"

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_FULL_MONTH_RE = "|".join(m for m in _MONTHS if len(m) > 4 or m in ("may", "june", "july"))
_WEEKDAYS = {
    "monday": 1, "tuesday": 2, "wednesday": 3, "thursday": 4, "friday": 5, "saturday": 6,
    "sunday": 7,
}  # fmt: skip
_ZH_WEEKDAYS = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "日": 7, "天": 7}
_MODIFIERS = {
    "next": "next", "coming": "next", "last": "last", "past": "last", "previous": "last",
    "this": "this", "current": "this", "下": "next", "上": "last", "本": "this", "这": "this",
    "这个": "this", "下个": "next", "上个": "last",
}  # fmt: skip
_OFFSETS = {"next": "+1", "last": "-1", "this": "0"}

# --- greetings and hedges that only look like times ---------------------------------------
GREETINGS = re.compile(
    rf"{_A}good\s?(?:morning|afternoon|evening|night|day){_Z}|(?:早上|上午|中午|下午|晚上)好|早安|午安|晚安",
    _I,
)

# --- absolute dates --------------------------------------------------------------------------
ISO_DATE = re.compile(
    r"(?<![\d.])(\d{4})\s?[-/.年]\s?(\d{1,2})\s?[-/.月]\s?(\d{1,2})\s?[日号]?(?![\d])"
)
SLASH_DATE = re.compile(
    r"(?<![\d/.])(\d{1,2})/(\d{1,2})(?:/(\d{4}|\d{2}))?(?![\d/])"
    r"|(?<![\d.])(\d{1,2})\.(\d{1,2})\.(\d{4})(?![\d.])"
)
EN_DATE = re.compile(
    rf"(?<![A-Za-z])({_MONTH_RE})\.?\s?(?:the\s)?(\d{{1,2}})(?:st|nd|rd|th)?(?![\d:])(?:,?\s?(\d{{4}}))?(?![\d])"
    rf"|(?<![A-Za-z0-9])(\d{{1,2}})(?:st|nd|rd|th)?\s?(?:of\s)?({_MONTH_RE})\.?(?![A-Za-z])(?:,?\s?(\d{{4}}))?(?![\d])"
    rf"|(?<![A-Za-z])({_MONTH_RE})\.?,?\s(\d{{4}})(?![\d])",
    _I,
)
_MONTH_CONTEXT = r"in|on|of|since|until|till|by|before|after|during|early|late|mid|next|last|this"
# A month named in full anywhere, or abbreviated after a word that makes it one ("in
# Nov", "during Sept."): "Nov" alone was read as a name, and "in November" / "in Nov"
# refused (session 44's review); "mar", "jan" or "dec" alone stay words.
_ABBREV_CONTEXT = r"in|during|since|until|till|before|after|early|mid|late|next|last|of"
# (not "apr": "the APR on my card", "how much do I pay in APR")
_ABBREV_MONTH_RE = "|".join(
    m for m in _MONTHS if len(m) <= 4 and m not in ("may", "june", "july", "apr")
)
EN_MONTH = re.compile(
    rf"(?<![A-Za-z])(?:(?:({_MONTH_CONTEXT})\s)?({_FULL_MONTH_RE})"
    rf"|({_ABBREV_CONTEXT})\s({_ABBREV_MONTH_RE})\.?)(?![A-Za-z])",
    _I,
)
ZH_DATE = re.compile(
    rf"(?:(\d{{4}}|[零〇一二三四五六七八九]{{4}})\s?年\s?)?(\d{{1,2}}|{ZH_NUM})\s?月份?\s?(?:(\d{{1,2}}|{ZH_NUM})\s?[日号號](?![元币本语期记常子]))?"
)
ZH_DAY = re.compile(rf"(?<![\d月])(\d{{1,2}}|{ZH_NUM})\s?[日号號](?![元币本语期记常子码])")

# --- relative dates --------------------------------------------------------------------------
_EN_REL: list[tuple[str, list[tuple[str, str]]]] = [
    (r"the\sday\safter\stomorrow|day\safter\stomorrow", [("date", "rel:+2")]),
    (r"the\sday\sbefore\syesterday|day\sbefore\syesterday", [("date", "rel:-2")]),
    (r"tomorrow|tomorow|tmrw?|2morrow", [("date", "rel:+1")]),
    (r"yesterday|yday", [("date", "rel:-1")]),
    (r"today'?s?|todays", [("date", "rel:0")]),
    (r"tonight|tonite", [("date", "rel:0"), ("time", "period:evening")]),
    (r"last\snight", [("date", "rel:-1"), ("time", "period:evening")]),
]
_ZH_REL: list[tuple[str, list[tuple[str, str]]]] = [
    ("大后天", [("date", "rel:+3")]),
    ("大前天", [("date", "rel:-3")]),
    ("后天", [("date", "rel:+2")]),
    ("前天", [("date", "rel:-2")]),
    ("明天|明日|明儿", [("date", "rel:+1")]),
    ("昨天|昨日|昨儿", [("date", "rel:-1")]),
    ("今天|今日|今儿", [("date", "rel:0")]),
    ("今晚", [("date", "rel:0"), ("time", "period:evening")]),
    ("明晚", [("date", "rel:+1"), ("time", "period:evening")]),
    ("昨晚", [("date", "rel:-1"), ("time", "period:evening")]),
    ("今早", [("date", "rel:0"), ("time", "period:morning")]),
    ("明早", [("date", "rel:+1"), ("time", "period:morning")]),
    ("今年", [("date", "year:0")]),
    ("明年", [("date", "year:+1")]),
    ("去年", [("date", "year:-1")]),
    ("前年", [("date", "year:-2")]),
    ("后年", [("date", "year:+2")]),
]
REL_DAY = re.compile(
    "|".join(f"({_A}(?:{p}){_Z})" for p, _ in _EN_REL)
    + "|"
    + "|".join(f"({p})" for p, _ in _ZH_REL),
    _I,
)
_REL_VALUES = [values for _, values in _EN_REL + _ZH_REL]
EN_WEEKDAY = re.compile(
    rf"{_A}(?:(next|coming|last|past|previous|this)\s)?({'|'.join(_WEEKDAYS)})s?{_Z}", _I
)
ZH_WEEKDAY = re.compile(
    r"(下个|上个|这个|下|上|本|这)?(?<![一二三四五六七八九十两几])(?:周|星期|礼拜)([一二三四五六日天])(?![次个遍回倍])"
)
EN_PERIOD = re.compile(
    rf"{_A}(next|coming|last|past|previous|this|current)\s(week|month|year|quarter|weekend){_Z}", _I
)
ZH_PERIOD = re.compile(
    r"(下个|上个|这个|下|上|本|这)(周末|周|星期|礼拜|月|季度)(?![一二三四五六日天])"
)
_ZH_PERIOD_UNITS = {"周": "week", "星期": "week", "礼拜": "week", "月": "month",
                    "季度": "quarter", "周末": "weekend"}  # fmt: skip

# --- times -----------------------------------------------------------------------------------
_MERIDIEM = r"(a\.?m\.?|p\.?m\.?)"
CLOCK = re.compile(
    rf"(?<![\d:.])([01]?\d|2[0-3]):([0-5]\d)(?::[0-5]\d)?(?![\d:])(?:\s?{_MERIDIEM}(?![A-Za-z]))?"
    rf"|(?<![A-Za-z0-9:.])(\d{{1,2}}|{EN_NUM})\s?{_MERIDIEM}(?![A-Za-z])"
    rf"|(?<![A-Za-z0-9:.])(\d{{1,2}}|{EN_NUM})\s?o'?\s?clock(?![A-Za-z])"
    rf"|(?<![A-Za-z0-9:.])(\d{{1,2}}|{EN_NUM})\s(?:in\sthe\s(morning|afternoon|evening)|at\s(night))(?![A-Za-z])"
    rf"|{_A}(noon|midday|midnight){_Z}",
    _I,
)
_ZH_PERIODS = "凌晨|早上|早晨|清晨|上午|中午|午后|下午|傍晚|晚上|夜里|夜间|半夜"
ZH_CLOCK = re.compile(
    rf"({_ZH_PERIODS})?\s?(\d{{1,2}}|{ZH_NUM})\s?[点點时時](?!间|候|代|期)"
    rf"(?:\s?(半|一刻|三刻|(\d{{1,2}}|{ZH_NUM})\s?(分)?))?(钟|鐘)?"
)
PERIOD = re.compile(
    rf"{_A}(?:this\s|in\sthe\s)?(early\smorning|morning|afternoon|evening|night){_Z}|({_ZH_PERIODS})",
    _I,
)
_PERIOD_NAMES = {
    "early morning": "late_night", "morning": "morning", "afternoon": "afternoon",
    "evening": "evening", "night": "evening", "凌晨": "late_night", "半夜": "late_night",
    "早上": "morning", "早晨": "morning", "清晨": "morning", "上午": "morning", "中午": "noon",
    "午后": "afternoon", "下午": "afternoon", "傍晚": "evening", "晚上": "evening",
    "夜里": "evening", "夜间": "evening",
}  # fmt: skip

YEAR = re.compile(
    r"(?<![A-Za-z0-9_.,$€£¥#:/-])(19\d{2}|20\d{2}|2100)(?![\d.,:/]\d|\d)"
    r"|(\d{4}|[零〇一二三四五六七八九]{4})\s?年"
)


def _valid(month: int, day: int | None = None) -> bool:
    return 1 <= month <= 12 and (day is None or 1 <= day <= 31)


def _ymd(year: int | None, month: int, day: int | None) -> str:
    if day is None:
        return f"{year:04d}-{month:02d}" if year else f"month:{month:02d}"
    return f"{year:04d}-{month:02d}-{day:02d}" if year else f"{month:02d}-{day:02d}"


def _int(text: str | None) -> int | None:
    if not text:
        return None
    value = parse_number(text)
    if value is None or value != value.to_integral_value():
        return None
    return int(value)


def _iso(m: re.Match[str]) -> list[tuple[str, str]] | None:
    y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
    return [("date", _ymd(y, mo, d))] if _valid(mo, d) else None


def _slash(m: re.Match[str]) -> list[tuple[str, str]] | None:
    a, b, y = (m.group(1), m.group(2), m.group(3)) if m.group(1) else m.group(4, 5, 6)
    first, second = int(a), int(b)
    year = None if y is None else int(y) + (2000 if len(y) == 2 else 0)
    if first > 12 and _valid(second, first):
        month, day = second, first
    elif (second > 12 or first == second) and _valid(first, second):
        month, day = first, second
    elif _valid(first, second) and _valid(second, first):
        value = f"{first:02d}/{second:02d}" + (f"/{year:04d}" if year else "")
        return [("date", value)]
    else:
        return None
    return [("date", _ymd(year, month, day))]


def _en_date(m: re.Match[str]) -> list[tuple[str, str]] | None:
    if m.group(1):
        month, day, year = _MONTHS[m.group(1).lower()], int(m.group(2)), _int(m.group(3))
    elif m.group(5):
        month, day, year = _MONTHS[m.group(5).lower()], int(m.group(4)), _int(m.group(6))
    else:  # "March 2024"
        return [("date", _ymd(_int(m.group(8)), _MONTHS[m.group(7).lower()], None))]
    return [("date", _ymd(year, month, day))] if _valid(month, day) else None


#: Where a capital "May" opens a sentence (the text before it), or a pronoun after it.
_SENTENCE_START = re.compile(r"(?:^|[.!?;:][\"')\]]*)\s*$")
_PRONOUN_AFTER = re.compile(r"\s+(?:i|we|you|he|she|they|it|one)\b", re.IGNORECASE)


def _en_month(m: re.Match[str]) -> list[tuple[str, str]] | None:
    if m.group(4):  # an abbreviation after its context word
        return [("date", f"month:{_MONTHS[m.group(4).lower()]:02d}")]
    word = m.group(2)
    if word.lower() == "may" and not m.group(1) and _is_modal(m):
        return None  # "may I", "you may", "May I…": the modal verb, not the month
    return [("date", f"month:{_MONTHS[word.lower()]:02d}")]


def _is_modal(m: re.Match[str]) -> bool:
    """A "may" with nothing before it that makes it a date: lower case, or a capital one
    opening a sentence (after spaces or a full stop too: " May I…" was a month before
    session 43, and missed its own stored repeat; a review) or before a pronoun ("MAY
    I…")."""
    if m.group(2)[0] != "M":
        return True
    text = m.string
    return bool(_SENTENCE_START.search(text, 0, m.start(2))) or bool(
        _PRONOUN_AFTER.match(text, m.end(2))
    )


def _zh_date(m: re.Match[str]) -> list[tuple[str, str]] | None:
    month, day, year = _int(m.group(2)), _int(m.group(3)), _int(m.group(1))
    if month is None or not _valid(month, day) or (m.group(3) and day is None):
        return None
    return [("date", _ymd(year, month, day))]


def _zh_day(m: re.Match[str]) -> list[tuple[str, str]] | None:
    day = _int(m.group(1))
    return [("date", f"day:{day:02d}")] if day is not None and 1 <= day <= 31 else None


def _rel(m: re.Match[str]) -> list[tuple[str, str]]:
    assert m.lastindex is not None
    return list(_REL_VALUES[m.lastindex - 1])


def _en_weekday(m: re.Match[str]) -> list[tuple[str, str]]:
    value = f"dow:{_WEEKDAYS[m.group(2).lower()]}"
    return [("date", f"{_MODIFIERS[m.group(1).lower()]}:{value}" if m.group(1) else value)]


def _zh_weekday(m: re.Match[str]) -> list[tuple[str, str]]:
    value = f"dow:{_ZH_WEEKDAYS[m.group(2)]}"
    return [("date", f"{_MODIFIERS[m.group(1)]}:{value}" if m.group(1) else value)]


def _en_period(m: re.Match[str]) -> list[tuple[str, str]]:
    return [("date", f"{m.group(2).lower()}:{_OFFSETS[_MODIFIERS[m.group(1).lower()]]}")]


def _zh_period(m: re.Match[str]) -> list[tuple[str, str]]:
    unit = _ZH_PERIOD_UNITS[m.group(2)]
    return [("date", f"{unit}:{_OFFSETS[_MODIFIERS[m.group(1)]]}")]


def _hm(hour: int, minute: int, meridiem: str | None) -> str | None:
    if meridiem:
        if not 1 <= hour <= 12:
            return None
        pm = meridiem.lower().startswith("p")
        hour = hour % 12 + (12 if pm else 0)
        return f"{hour:02d}:{minute:02d}"
    if not 0 <= hour <= 23 or not 0 <= minute <= 59:
        return None
    if hour == 0 or hour > 12:
        return f"{hour:02d}:{minute:02d}"
    return f"h12:{hour:02d}:{minute:02d}"


def _clock(m: re.Match[str]) -> list[tuple[str, str]] | None:
    g = m.group
    if g(1) is not None:
        value = _hm(int(g(1)), int(g(2)), g(3))
    elif g(4) is not None:
        hour = _int(g(4))
        value = None if hour is None else _hm(hour, 0, g(5))
    elif g(6) is not None:
        hour = _int(g(6))
        value = None if hour is None or not 1 <= hour <= 12 else f"h12:{hour:02d}:00"
    elif g(7) is not None:
        hour = _int(g(7))
        value = None if hour is None else _hm(hour, 0, "am" if g(8) == "morning" else "pm")
    else:
        value = "00:00" if g(10).lower() == "midnight" else "12:00"
    return None if value is None else [("time", value)]


def _zh_clock(m: re.Match[str]) -> list[tuple[str, str]] | None:
    period, hour_text, extra, minute_text, fen, zhong = m.group(1, 2, 3, 4, 5, 6)
    hour = _int(hour_text)
    if hour is None:
        return None
    if not (period or fen or zhong or extra in ("半", "一刻", "三刻")):
        if minute_text:
            return None  # "三点五" is a decimal, not a time
        if hour_text == "一":
            return None  # "一点" alone is "a little"
    minute = {"半": 30, "一刻": 15, "三刻": 45}.get(extra or "", 0)
    if minute_text:
        parsed = _int(minute_text)
        if parsed is None:
            return None
        minute = parsed
    if not 0 <= hour <= 24 or not 0 <= minute <= 59:
        return None
    if period:
        name = _PERIOD_NAMES[period]
        if period in (
            "凌晨",
            "半夜",
            "夜里",
            "夜间",
        ):  # the night: 夜里两点 = 02:00, 夜里十点 = 22:00
            hour = 0 if hour == 12 else hour + 12 if 6 <= hour < 12 else hour
        elif (name in ("afternoon", "evening") and hour < 12) or (name == "noon" and hour < 6):
            hour += 12
        return [("time", f"{hour % 24:02d}:{minute:02d}")]
    return [("time", _hm(hour, minute, None) or f"{hour:02d}:{minute:02d}")]


def _period(m: re.Match[str]) -> list[tuple[str, str]]:
    word = re.sub(r"\s+", " ", (m.group(1) or m.group(2)).lower())
    return [("time", f"period:{_PERIOD_NAMES[word]}")]


def _year(m: re.Match[str]) -> list[tuple[str, str]] | None:
    text = m.group(1) or m.group(2)
    year = _int(text)
    if year is None or not 1000 <= year <= 2100:
        return None
    return [("year", str(year))]


def extract_numeric_dates(scan: Scanner) -> None:
    """Dates written only with digits: before versions (``2024.03.05``)."""
    scan.drop(GREETINGS)
    scan.take(ISO_DATE, _iso)
    scan.take(SLASH_DATE, _slash)


def extract_dates(scan: Scanner) -> None:
    scan.take(EN_DATE, _en_date)
    scan.take(ZH_WEEKDAY, _zh_weekday)
    scan.take(ZH_DATE, _zh_date)
    scan.take(ZH_DAY, _zh_day)
    scan.take(REL_DAY, _rel)
    scan.take(EN_WEEKDAY, _en_weekday)
    scan.take(EN_PERIOD, _en_period)
    scan.take(ZH_PERIOD, _zh_period)
    scan.take(EN_MONTH, _en_month)


def extract_times(scan: Scanner) -> None:
    scan.take(CLOCK, _clock)
    scan.take(ZH_CLOCK, _zh_clock)
    scan.take(PERIOD, _period)


def extract_years(scan: Scanner) -> None:
    scan.take(YEAR, _year)
