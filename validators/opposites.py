"""The opposites ``validators.polarity`` reads as action pairs: words and their
prefixed negations (legal / illegal), antonyms of evaluation (``validators.antonyms``)
and contrast sets of who or which kind (``validators.contrasts``). All refuse only when
both texts name opposite poles (``default="any"``).
"""

from __future__ import annotations

import re
from collections.abc import Set
from dataclasses import dataclass

from validators.antonyms import ANTONYMS, ZH_ANTONYMS
from validators.contrasts import contrast_pairs

_A = r"(?<![A-Za-z])"
_Z = r"(?![A-Za-z])"


@dataclass(frozen=True, slots=True)
class ActionPair:
    name: str
    plus: str  # regex alternatives for the "+" pole
    minus: str  # regex alternatives for the "-" pole
    # the pole a one-sided mention may have without refusing: "+", "-", "any" or None
    default: str | None
    # read only in texts this matches (regex; empty: every text)
    only_if: str = ""


def en_words(words: str) -> str:
    return rf"{_A}(?:{words}){_Z}"


# Negation by prefix: a word and its prefixed opposite. Refused only when both texts
# name the same word with opposite poles ("is it legal" vs "is it illegal"); one text
# naming it alone is not read as a contrast.
_PREFIXED: tuple[tuple[str, str, str], ...] = (
    ("legal", r"legal(?:ly)?", r"illegal(?:ly)?"),
    ("allowed", r"allowed", r"disallowed"),
    ("permitted", r"permitted|permissible", r"impermissible"),
    ("refundable", r"refundable", r"non[\s-]?refundable"),
    ("transferable", r"transferr?able", r"non[\s-]?transferr?able"),
    ("taxable", r"taxable", r"non[\s-]?taxable"),
    ("valid", r"valid", r"invalid"),
    ("eligible", r"eligible", r"ineligible|non[\s-]?eligible"),
    ("authorized", r"authori[sz]ed", r"unauthori[sz]ed|non[\s-]?authori[sz]ed"),
    ("possible", r"possible", r"impossible"),
    ("available", r"available", r"unavailable"),
    ("safe", r"safe", r"unsafe"),
    ("secure", r"secure", r"insecure|unsecured?"),
    ("reversible", r"reversible", r"irreversible"),
    ("responsible", r"responsible", r"irresponsible"),
    ("appropriate", r"appropriate", r"inappropriate"),
    ("complete", r"complete", r"incomplete"),
    ("active", r"active", r"inactive"),
    ("paid", r"paid", r"unpaid"),
    ("approved", r"approved", r"unapproved|disapproved"),
    ("verified", r"verified", r"unverified"),
    ("official", r"official", r"unofficial"),
    ("limited", r"limited", r"unlimited"),
    # "unhappy with my order" / "happy with my order" (session 38's review)
    ("happy", r"happy", r"unhappy"),
    ("satisfied", r"satisfied", r"dissatisfied|unsatisfied"),
)


# "not happy" is "unhappy" (session 40): a "not" (isn't, aren't …) right before the "+"
# word of a prefixed pair reads as that pair's "-" pole, and ``compare_polarity`` lets
# a question whose only negation is such a "not" meet one that names the "-" word.
# Left out: "not responsible for" (not liable) is not "irresponsible", and "not
# limited to" lists, it does not negate.
_NOT_READ_AS_MINUS = frozenset(
    name for name, _, _ in _PREFIXED if name not in ("responsible", "limited")
)
_NOT_PLUS_WORDS = "|".join(plus for name, plus, _ in _PREFIXED if name in _NOT_READ_AS_MINUS)
NOT_PREFIXED = re.compile(
    rf"(?:{_A}(?:not|isnt|arent|wasnt|werent|aint)|n['’]t)\s+"
    rf"(?:(?:very|really|fully|completely|entirely|totally|quite|yet|even|always)\s+)?"
    rf"({_NOT_PLUS_WORDS}){_Z}",
    re.IGNORECASE,
)
_PLUS_RES = tuple(
    ("prefix_" + name, re.compile(plus, re.IGNORECASE))
    for name, plus, _ in _PREFIXED
    if name in _NOT_READ_AS_MINUS
)


_NOT_LEGAL_ZH = re.compile("不合法")  # 不合法吗 / 违法吗, as "not legal" / "illegal"
# "did not succeed" / "failed", 没成功 / 失败 (the antonym pair's "-" word explains the
# negation; refused before session 45)
_NOT_ANTONYMS = (
    (
        re.compile(
            r"(?:(?<![A-Za-z])(?:not|never)|n['’]t)\s+(?:succeed(?:ed)?|successful(?:ly)?"
            # session 50's misfire hunt: "the payment doesn't go through" is "fails",
            # 无法登录 is 登录失败 (refused before)
            # (a subject between: "Why didn't my top-up go through?"); not "hasn't gone
            # through", "isn't going through": still pending (BANKING77 files them apart
            # from a failed top-up)
            r"|(?:(?:my|the|your|our|this|that|a|an)\s+)?(?:[\w'-]+\s+)?(?:go|goes|went)\sthrough)"
            r"(?![A-Za-z])|(?:没有?|未能?|不)成功|(?:无法|没法)(?=登录|登陆|支付|付款|转账|提现|注册|下单|充值)",
            re.IGNORECASE,
        ),
        "antonym_success",
    ),
    # "I don't remember my password" is "I forgot my password" (session 50)
    (
        re.compile(
            r"(?:(?<![A-Za-z])(?:not|never)|n['’]t)\s+(?:remember|recall)(?![A-Za-z])"
            r"|不记得|想不起",
            re.IGNORECASE,
        ),
        "antonym_forgot",
    ),
)
NEGATED_BY_PREFIXED = "negation:prefixed"  # a text whose every negation is such a "not"


def negated_pair(word: str) -> str:
    """The prefixed pair whose "+" word ``word`` is (a group of :data:`NOT_PREFIXED`)."""
    return next(name for name, plus in _PLUS_RES if plus.fullmatch(word))


def blank_not_prefixed(work: str, text: str) -> tuple[str, str, set[str]]:
    """``work`` (the text, hedges blanked) and ``text`` with each "not <+ word>" blanked,
    and a ``not:<pair>`` value for each: a negation that the other text's "-" word
    explains (:func:`negation_explained`). Blanked, so "happy" is not read as the "+"
    pole; not read as the "-" pole either: against "can't see the funds being
    available" (both negative, "+" one-sided) that refused what was served (BANKING77:
    163 same-intent pairs in a trial)."""
    values: set[str] = set()
    found = [(m.span(), negated_pair(m.group(1))) for m in NOT_PREFIXED.finditer(work)]
    found += [(m.span(), "prefix_legal_zh") for m in _NOT_LEGAL_ZH.finditer(work)]
    found += [(m.span(), name) for pattern, name in _NOT_ANTONYMS for m in pattern.finditer(work)]
    for (start, end), name in found:
        values.add("not:" + name)
        work = work[:start] + " " * (end - start) + work[end:]
        text = text[:start] + " " * (end - start) + text[end:]
    return work, text, values


def negation_explained(a: Set[str], b: Set[str]) -> bool:
    """Whether the one negative text's every negation is a "not X" whose pair the other
    text names by its "-" word: "I'm not happy with it" / "I'm unhappy with it"."""
    neg, pos = (a, b) if "negative" in a else (b, a)
    if NEGATED_BY_PREFIXED not in neg:
        return False
    names = [v.removeprefix("not:") for v in neg if v.startswith("not:")]
    return all(f"{name}:-" in pos for name in names)


PREFIX_PAIRS = (
    *(
        ActionPair("prefix_" + name, en_words(plus), en_words(minus), "any")
        for name, plus, minus in _PREFIXED
    ),
    ActionPair("prefix_legal_zh", "合法", "非法|违法|不合法", "any"),
)


# Opposite evaluations (love / hate, cheap / expensive): validators/antonyms.py.
def _zh(name: str, pole: int) -> str:
    return "|" + ZH_ANTONYMS[name][pole] if name in ZH_ANTONYMS else ""


ANTONYM_PAIRS = (
    *(
        ActionPair(
            "antonym_" + name, en_words(plus) + _zh(name, 0), en_words(minus) + _zh(name, 1), "any"
        )
        for name, plus, minus in ANTONYMS
    ),
    *(
        ActionPair("antonym_" + name, plus, minus, "any")
        for name, (plus, minus) in ZH_ANTONYMS.items()
        if name not in {n for n, _, _ in ANTONYMS}
    ),
    # A pole alone, which refuses nothing: "forgot" explains a "don't remember" on the
    # other side (``negation_explained``), and "help me remember my PIN" is one question
    # with "I forgot my PIN" (a remember / forget pair refused it: CLINC150, session 50).
    ActionPair(
        "antonym_forgot",
        r"(?!)",
        en_words(r"forg(?:et|ets|ot|otten|etting)") + "|忘了|忘记|忘掉",
        "any",
    ),
)
# who / which kind: buyer / seller, adult / child, economy / business class (contrasts.py)
CONTRAST_PAIRS = tuple(ActionPair(n, plus, minus, "any") for n, plus, minus in contrast_pairs())
