"""Places in any case: the countries, US states, Canadian provinces and UK nations a
question may name in lower case ("how long does a divorce take in england?") or as
an acronym ("the legal drinking age in the US"), which the Titlecase rule of
``validators.names`` cannot see. A review of session 38 found "… in england?" /
"… in scotland?", "… in ontario?" / "… in quebec?" and "in the US" / "in the UK"
served each other's answers at verifier scores of 0.99.

Each place is one ``polarity`` value ``place:<id>``, its canonical id whatever its
spelling: "US", "U.S.", "u.s.", "USA", "United States" and "united states" are all
``us``; "UK", "United Kingdom" and "Britain" ``uk`` (England, Scotland, Wales and
Northern Ireland stay apart: their laws differ). "US" counts only in capitals ("us"
is a pronoun). Like the contrast sets, two texts differ only when **both** name
places and not the same ones: "When can I expect my card? I live in the US." asks
what "When can I expect my card?" asks (one-sided, as labelled in BANKING77), while
"… in the US?" and "… in the UK?" do not. (A first version made places names, which
refuse one-sided: 1.6% of the eval split's nearest paraphrases were refused, most of
them such a one-sided country.) The Titlecase rule of ``validators.names`` still reads
a capitalised place as a name too.
"""

from __future__ import annotations

import re
from collections.abc import Set

_COUNTRIES = """
argentina australia austria bangladesh belgium brazil bulgaria canada chile china colombia
croatia cuba czechia denmark egypt estonia ethiopia finland france germany ghana greece
hungary iceland india indonesia iran iraq ireland israel italy jamaica japan kenya latvia
lebanon lithuania luxembourg malaysia mexico morocco nepal netherlands nigeria norway pakistan
peru philippines poland portugal qatar romania russia serbia singapore slovakia slovenia
spain sweden switzerland taiwan thailand turkey ukraine vietnam zimbabwe
england scotland wales
new_zealand south_africa saudi_arabia hong_kong northern_ireland south_korea north_korea
sri_lanka costa_rica puerto_rico czech_republic dominican_republic
"""
_US_STATES = """
alabama alaska arizona arkansas california colorado connecticut delaware florida georgia
hawaii idaho illinois indiana iowa kansas kentucky louisiana maine maryland massachusetts
michigan minnesota mississippi missouri montana nebraska nevada ohio oklahoma oregon
pennsylvania tennessee texas utah vermont virginia wisconsin wyoming
new_hampshire new_jersey new_mexico new_york north_carolina north_dakota south_carolina
south_dakota rhode_island west_virginia
"""
_PROVINCES = """
ontario quebec alberta manitoba saskatchewan nova_scotia british_columbia new_brunswick
newfoundland
"""
#: Other spellings of one place, lower case, to its canonical id.
_SYNONYMS = {
    "united states": "us",
    "united states of america": "us",  # not "america": South / Latin America
    "united kingdom": "uk",
    "great britain": "uk",
    "britain": "uk",
    "holland": "netherlands",
    "the netherlands": "netherlands",
    "korea": "south korea",
    "czech republic": "czechia",
}
#: Acronyms: "US" in capitals only (the pronoun), the others in any case
_ACRONYMS = {"usa": "us", "u.s.": "us", "u.s.a.": "us", "uk": "uk", "u.k.": "uk",
             "eu": "eu", "uae": "uae"}  # fmt: skip

_NAMES = sorted(
    {w.replace("_", " ") for block in (_COUNTRIES, _US_STATES, _PROVINCES) for w in block.split()}
    | set(_SYNONYMS),
    key=len,
    reverse=True,  # longest first: "new york" before "york", "united states of america"
)
_ALL_IDS = frozenset(_SYNONYMS.get(n, n) for n in _NAMES) | frozenset(_ACRONYMS.values())
_PLACE = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    + "|".join(re.escape(n).replace(r"\ ", r"\s+") for n in _NAMES)
    + r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_ACRONYM = re.compile(
    r"(?<![A-Za-z0-9.])(?:(?-i:US)|"
    + "|".join(re.escape(a) for a in sorted(_ACRONYMS, key=len, reverse=True))
    + r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)


def find_places(text: str) -> list[tuple[str, int, int]]:
    """``(canonical id, start, end)`` of every place ``text`` names."""
    found = []
    for m in _PLACE.finditer(text):
        name = " ".join(m.group().lower().split())
        found.append((_SYNONYMS.get(name, name), m.start(), m.end()))
    for m in _ACRONYM.finditer(text):
        found.append((_ACRONYMS.get(m.group().lower(), "us"), m.start(), m.end()))
    return sorted(found, key=lambda f: f[1])


def place_values(text: str) -> set[str]:
    """``place:<id>`` for every place ``text`` names."""
    return {f"place:{place}" for place, _, _ in find_places(text)}


def places_agree(a: Set[str], b: Set[str]) -> bool:
    """False when both name places, and not the same ones."""
    pa = {v for v in a if v.startswith("place:")}
    pb = {v for v in b if v.startswith("place:")}
    return not (pa and pb) or pa == pb


def known_place_value(value: str) -> bool:
    place = value.removeprefix("place:")
    return place in _ALL_IDS
