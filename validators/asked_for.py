"""Two questions about the same thing that ask for different things: a time, a place, an
amount, a person, a frequency; or a choice against one of its options.

"When is the next bus to the airport?" and "Where is the next bus to the airport?" share
every word but the question word, and the embedder and the verifier read them as one
question (0.979 / 0.996 in session 49's misfire hunt; also "How much is the annual fee?"
/ "When is the annual fee charged?", "How often are statements sent?" / "How many
statements are sent?", 年终奖什么时候发 / 年终奖发多少). A rule on the question word alone
would cost many true paraphrases: support questions ask one thing in many ways ("Where
is my card?", "When will my card arrive?", "Why haven't I got my card?" are one intent in
BANKING77: about 1% of the same-intent pairs close enough to be retrieved). So a pair is
refused only as a *minimal pair*: each text asks for exactly one of these, they differ,
and apart from the question words (and auxiliaries, articles, pronouns) their words are
the same but for at most one ("charged" above). Chinese is compared by characters.

Not classed, so never refused here: "how do I" / 怎么 (a procedure), "what" / "which"
alone, and "where can I find / see / check" (asks for the thing, not for a place:
"Where can I find the exchange rate?" is "What is the exchange rate?"). "How many times"
is a frequency, as "how often" is (BANKING77 files them together).

:func:`narrows_choice` reads a near kin, a choice against one of its options: "Is coffee
or tea healthier?" / "Is tea healthier?", "Do you have vegan or gluten-free options?" /
"Do you have gluten-free options?" (0.965 / 0.995 and 0.966 / 0.996 in the hunt). Only
as an exact minimal pair (the same words but one option and its "or"): an "or" between
clauses ("Is that something you do or can I do it?") is common in one intent's
wordings, and a looser rule cost 0.17-0.31% of the close same-intent pairs.
"""

from __future__ import annotations

import functools
import re

_EN_CLASSES = (
    ("frequency", r"how\s(?:often|frequently|regularly)|how\smany\stimes"),
    # a length of time: against an amount ("how many miles until I change my tires"), a
    # time ("how long until …" is "when …") or an amount of days ("how many vacation days
    # do I have") it is one question too often
    (
        "duration",
        r"how\s(?:long|soon)|how\smuch\s(?:longer|time|notice|in\sadvance|ahead|earlier)"
        r"|how\smany\s(?:days|hours|weeks|minutes|months|years|business\sdays)"
        r"|how\sfar\sin\sadvance",
    ),
    # not "When I travel abroad, are there fees?": a condition, then the question
    (
        "time",
        r"when(?!\s(?:i|you|we|they|he|she|it|my|your|our|their|the|a|an|someone)\s[^?.!]*,)"
        r"|what\s(?:time|day|date|year|month)|which\s(?:day|date)|by\swhen|until\swhen",
    ),
    (
        "amount",
        r"how\smuch|how\smany|what(?:'s|\sis|\sare)?\sthe\s(?:cost|price|fee|amount|rate|charge)s?",
    ),
    # "where can I find / see …" asks for the thing itself, "where is my card" for its
    # state (as "when will my card arrive" does)
    (
        "place",
        r"where(?!\s(?:can|could|do|should|would)\s(?:i|we|you)\s(?:find|see|check|get|view|look))"
        r"(?!(?:\s(?:is|are)|'s|s)\s(?:all\s)?my\s)",
    ),
    ("person", r"who(?:m|se)?"),
)
# Where an English question word asks: at the start of the text or of a clause, after
# a greeting or "can you tell me", not inside one ("What does it mean when …", "a fee
# charged when I paid"). Possessive (``*+``, ``?+``): tried after every comma, a
# backtracking prefix took seconds on a text of many "hi, " (a review, session 49).
_EN_START = (
    r"(?:^|(?<=[.?!;:,]))\s*+(?:(?:hi|hello|hey|so|and|ok|okay|please|excuse\sme)[\s,]++){0,4}+"
    r"(?:(?:can|could|would)\syou\s(?:please\s)?tell\sme\s|do\syou\sknow\s|tell\sme\s"
    r"|(?:i\s(?:want|need|would\slike)|i'?d\slike)\sto\sknow\s|i\s(?:wonder|am\swondering)\s"
    r"|i'm\swondering\s)?+"
)
_ZH_CLASSES = (
    # the words between 多久 and 一次 are what is asked about: left in
    ("frequency", r"多久(?=.{0,6}?一次)|隔多久|每隔|多长时间(?=.{0,6}?一次)|几天一次|多少次|几次"),
    ("duration", r"多久|多长时间|(?:多少|几)个?(?:天|小时|星期|周|月|年|工作日|分钟)"),
    ("time", r"什么时候|啥时候|几点|哪天|何时|几号|什么时间"),
    ("amount", r"多少|几个|几张|几件|几元|几块"),
    # 哪 alone after 在 / 去 / 到 only (哪个银行 is "which bank")
    ("place", r"[在去到]?哪(?:里|儿)|[在去到]哪|什么地方|何处|哪个地方"),
    ("person", r"谁"),
)
#: The pairs of classes that need other answers. Not a reason ("why": a complaint asks
#: "why", "where" and "when" of one charge alike: no class), nor a frequency against a
#: time ("How often should I change my oil?" is "When should I change my oil?"), nor a
#: person against a place ("Who do I report lost luggage to?" is "Where do I report
#: it?"); a duration against a place or a person only.
_CLASH = frozenset(
    frozenset(pair)
    for pair in (
        ("time", "place"),
        ("time", "amount"),
        ("time", "person"),
        ("place", "amount"),
        ("person", "amount"),
        ("frequency", "amount"),
        ("frequency", "place"),
        ("frequency", "person"),
        ("duration", "place"),
        ("duration", "person"),
    )
)
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_EN = [
    (name, re.compile(rf"{_EN_START}(?:{pattern})(?:'s)?(?![a-z'])", re.I))
    for name, pattern in _EN_CLASSES
]
#: 寄到哪里了: where it has got to (a state), whatever the verb.
_GOT_TO = re.compile(r"哪(?:里|儿)?了")
#: Where a thing is, against when it arrives: one question ("Where is my refund?" /
#: "When will I get my refund?", 快递到哪了 / 快递什么时候到).
_ARRIVES = re.compile(
    r"(?<![a-z])(?:arriv\w*|come|comes|coming|get|receive|received|deliver\w*|reach\w*|show\sup"
    r"|ship\w*|land\w*)(?![a-z])|到|寄到|送达|到达",
    re.I,
)
_ZH = [(name, re.compile(pattern)) for name, pattern in _ZH_CLASSES]

# Words that say nothing of what is asked about: auxiliaries, articles, pronouns,
# prepositions and politeness ("can you tell me …").
_FILLER = frozenset({
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "being", "am", "do",
    "does", "did", "done", "will", "would", "can", "could", "should", "shall", "may",
    "might", "must", "have", "has", "had", "i", "me", "my", "mine", "we", "us", "our",
    "you", "your", "it", "its", "they", "them", "their", "this", "that", "these", "those",
    "there", "here", "to", "of", "in", "on", "at", "for", "from", "by", "with", "about",
    "please", "tell", "know", "want", "like", "need", "get", "got", "going", "gonna",
    "let", "just", "so", "and", "or", "if", "then", "what", "which",
})  # fmt: skip
_ZH_FILLER = set("吗呢吧啊呀的了是在要会能可以请问你们我他她它这那个一下就都还也呀么")


def has_han(text: str) -> bool:
    return _HAN.search(text) is not None


@functools.lru_cache(maxsize=4096)  # a lookup asks the same question of each candidate
def _asked(text: str) -> tuple[str | None, str]:
    """What ``text`` asks for (one class, or None: none or several) and the text with
    the question words taken out."""
    classes = _ZH if has_han(text) else _EN
    found: set[str] = set()
    rest = text.replace("’", "'")
    for name, pattern in classes:  # the longer phrases first ("how many times")
        if pattern.search(rest):
            found.add(name)
            rest = pattern.sub(" ", rest)
    return (found.pop() if len(found) == 1 else None), rest


def _words(rest: str, zh: bool) -> set[str]:
    if zh:
        return {c for c in rest if has_han(c) and c not in _ZH_FILLER}
    return {w for w in re.findall(r"[a-z0-9']+", rest.lower()) if w not in _FILLER}


def asks_for_other(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are the same question but for what they ask for (the
    module docstring)."""
    zh = has_han(a)
    if zh != has_han(b):
        return False
    kind_a, rest_a = _asked(a)
    kind_b, rest_b = _asked(b)
    if kind_a is None or kind_b is None or frozenset((kind_a, kind_b)) not in _CLASH:
        return False
    if {kind_a, kind_b} == {"place", "time"}:
        when, where = (b, a) if kind_b == "time" else (a, b)
        # not "Where are cards delivered to?": a destination, not a state
        if _ARRIVES.search(when) and (not _ARRIVES.search(where) or _GOT_TO.search(where)):
            return False
    words_a, words_b = _words(rest_a, zh), _words(rest_b, zh)
    shared = words_a & words_b
    return bool(shared) and len(words_a ^ words_b) <= 1


def narrows_choice(a: str, b: str) -> bool:
    """Whether one text offers a choice ("Is coffee or tea healthier?") and the other is
    the same question about one of its two options ("Is tea healthier?"): the same
    words, one alternative and its "or" taken out (English; 还是 is also "still")."""
    for x, y in ((a, b), (b, a)):
        wx, wy = _tokens(x), _tokens(y)
        if "or" not in wx or "or" in wy or len(wx) != len(wy) + 2:
            continue
        for i, word in enumerate(wx):
            if word != "or" or not 0 < i < len(wx) - 1 or wx[i + 1] in _NO_OPTION:
                continue
            if wy in (wx[: i - 1] + wx[i + 1 :], wx[:i] + wx[i + 2 :]):
                return True
    return False


#: "… or not", "… or what": a yes-no question's tag, no second option.
_NO_OPTION = frozenset({"not", "no", "what", "nothing", "something", "otherwise"})


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9][a-z0-9'-]*", text.lower())
