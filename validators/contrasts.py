"""Mutually exclusive qualifiers: the contrast sets ``validators.polarity`` reads.

"How does a buyer get a refund?" and "How does a seller get a refund?", "the maximum
daily dose of ibuprofen for adults" and "… for children", "checked baggage for economy
passengers" and "… business class passengers": one word names *who* or *which kind*,
the rest is a template the embedder and the pair verifier both read as the same
question (a review of session 38 found such pairs served at verifier scores of
0.985-0.996, where a synonym swap such as change / update scored 0.86). Each set
names the members of one closed dimension: parties of a transaction or relationship,
the population a dose or a price is for, a customer's tier, a travel class, a room, a
jurisdiction's level, a channel. Its members become ``antonym``-style pairs
(``contrast_<set>_<a>_<b>``), which refuse only when **both** texts name members and
they differ: a text naming none ("How do I get a refund?") or the same member in
other words (kid / child) is never refused, and one naming two members ("between a
buyer and a seller") contrasts with nothing. So the sets only have to be right about
what excludes what, and stay small.

Words that are mostly something else are anchored or left out: "business" only as a
travel class, "state" only before law / tax / court, "host" and "guest" only as
people (not a web host), "economy" only without "premium" before it. Chinese members
are whole words that do not occur inside others in FAQ text.

Two members in one text are read in order too (``order_<set>:<first>><second>``):
"Can a guest check in without the host present?" and "Can a host check in without
the guest present?" name the same two and differ only in who does what (served at
verifier 0.986 in the review). Two texts that both order one set's members must order
them alike; a passive ("… reset by the instructor", 被 / 由) is not read, since it
turns the order round without changing the meaning.
"""

from __future__ import annotations

import re
from collections.abc import Set
from itertools import combinations

from validators.contrast_kinds import KIND_SETS
from validators.contrast_roles import CATEGORY_SETS, ROLE_SETS
from validators.contrast_scopes import SCOPE_SETS, UNORDERED
from validators.contrast_settings import SETTING_SETS
from validators.contrast_variants import VARIANT_SETS

_A = r"(?<![A-Za-z])"
_Z = r"(?![A-Za-z])"


def _en(words: str) -> str:
    return rf"{_A}(?:{words}){_Z}"


#: (set name, ((member name, English regex, Chinese alternatives), ...))
CONTRAST_SETS = (
    *KIND_SETS,
    *SCOPE_SETS,
    *SETTING_SETS,
    *ROLE_SETS,
    *CATEGORY_SETS,
    *VARIANT_SETS,
)


def _member(en: str, zh: str) -> str:
    """One member's regex, English and Chinese together (either may be empty)."""
    return "|".join(part for part in (_en(en) if en else "", zh) if part)


def member_patterns() -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """Each set's members as ``(member, regex)``, English and Chinese together."""
    return tuple(
        (name, tuple((m, _member(en, zh)) for m, en, zh in members))
        for name, members in CONTRAST_SETS
    )


def contrast_pairs() -> tuple[tuple[str, str, str], ...]:
    """Every two members of a set as ``(name, plus regex, minus regex)``, the shape of
    ``validators.antonyms.ANTONYMS`` entries (``plus`` / ``minus`` are whole regexes
    here, English and Chinese together)."""
    out: list[tuple[str, str, str]] = []
    for set_name, members in CONTRAST_SETS:
        for (a, en_a, zh_a), (b, en_b, zh_b) in combinations(members, 2):
            out.append((f"contrast_{set_name}_{a}_{b}", _member(en_a, zh_a), _member(en_b, zh_b)))
    return tuple(out)


_MEMBERS = [
    (name, [(m, re.compile(p, re.IGNORECASE)) for m, p in members])
    for name, members in member_patterns()
]
_PASSIVE = re.compile(_en(r"by\s(?:the|a|an|his|her|their|my|your)") + "|被|由", re.IGNORECASE)
# "buyers and sellers", "买家和卖家": two members joined, in no order that means anything
_JOINED = re.compile(
    r"\s*(?:,\s*)?(?:and|or|&|/|vs\.?|versus|as\swell\sas|和|或|与|跟|及|以及|、)"
    r"\s*(?:(?:the|a|an|their|its)\s)?",
    re.IGNORECASE,
)


# the head both members qualify, said after each: 成人票和儿童票, "adult tickets and child
# tickets" (session 51: "成人票和儿童票价格一样吗" against the reverse was refused as a role swap)
_HEAD_EN = re.compile(r"\s+[a-z'-]+", re.IGNORECASE)
_HAN_HEAD = re.compile(r"[\u4e00-\u9fff]{1,2}")


def _joined(text: str, end_a: int, start_b: int, end_b: int) -> bool:
    """Whether the two members at ``end_a`` and ``start_b`` are joined by "and" / "or" /
    和, directly or each before the same head word."""
    if _JOINED.fullmatch(text, end_a, start_b):
        return True
    after = text[end_b:].lower()
    return any(
        _JOINED.fullmatch(text, end_a + len(head), start_b) is not None
        and after.startswith(head.lower())
        for head in _heads(text[end_a:start_b])
    )


def _heads(gap: str) -> list[str]:
    """The words that may be a head right after the first member: one or two Chinese
    characters, or one English word."""
    if (m := _HEAD_EN.match(gap)) is not None:
        return [m.group()]
    return [gap[:n] for n in (1, 2) if _HAN_HEAD.fullmatch(gap[:n])]


def contrast_values(text: str) -> set[str]:
    """The polarity values of the contrast sets, from one search per member: each pair's
    ``contrast_<set>_<a>_<b>:+`` / ``:-`` (the pairs of :func:`contrast_pairs`, which
    ``validators.polarity`` compares), and ``order_<set>:<a>><b>`` for a set two of
    whose members the text names, in the order it first names them (a role swap: guest
    … host against host … guest); no order for a passive or two members joined by
    "and" / "or" / 和."""
    out: set[str] = set()
    passive = _PASSIVE.search(text) is not None
    for name, members in _MEMBERS:
        first = sorted(
            (m.start(), m.end(), member)
            for member, pattern in members
            if (m := pattern.search(text))
        )
        named = {member for _, _, member in first}
        for (a, _), (b, _) in combinations(members, 2):
            if a in named:
                out.add(f"contrast_{name}_{a}_{b}:+")
            if b in named:
                out.add(f"contrast_{name}_{a}_{b}:-")
        two = len(first) >= 2 and not passive and name not in UNORDERED
        if two and not _joined(text, first[0][1], first[1][0], first[1][1]):
            out.add(f"order_{name}:{first[0][2]}>{first[1][2]}")
    return out


def orders_agree(a: Set[str], b: Set[str]) -> bool:
    """False when both texts order one set's two members, differently."""
    orders_a = dict(v.split(":", 1) for v in a if v.startswith("order_"))
    orders_b = dict(v.split(":", 1) for v in b if v.startswith("order_"))
    return all(orders_b.get(s, order) == order for s, order in orders_a.items())


def known_order_value(value: str) -> bool:
    name, _, pole = value.partition(":")
    members = {m for m, _ in dict(member_patterns()).get(name.removeprefix("order_"), ())}
    first, _, second = pole.partition(">")
    return first in members and second in members and first != second
