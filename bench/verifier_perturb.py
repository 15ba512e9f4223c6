"""Meaning-changing and meaning-keeping rewrites of real questions (bench/verifier_pairs.py).

Each rewrite takes one real sentence and returns a changed copy, or ``None`` when
the pattern does not apply. The rewrites that change the answer:

``direction``   the two ends of a movement or conversion swap places ("convert
                Celsius to Fahrenheit" -> "convert Fahrenheit to Celsius",
                "transfer from savings to checking" -> "... from checking to
                savings"; Chinese 从A到B -> 从B到A).
``word_order``  the two sides of a comparison or a sequence swap ("X bigger than
                Y", "X before Y"), or the first two numbers swap places. Like
                PAWS, the words stay the same and only their roles change.
``polarity``    a negation is added or removed ("why did my transfer fail" ->
                "why did my transfer not fail", "can't" -> "can"), or a verb is
                replaced by its opposite (activate/deactivate, 可以/不可以).

``surface`` keeps the answer: case, trailing punctuation and a polite prefix
change, nothing else. It teaches that such noise is not a reason to refuse.
"""

from __future__ import annotations

import random
import re

_WORDS = r"[A-Za-z0-9$£€][\w'.$£€-]*"
_SPAN = rf"{_WORDS}(?: {_WORDS})?"
_STOP = {"a", "an", "the", "my", "your", "i", "me", "it", "is", "be", "do", "can", "how", "what"}

_FROM_TO = re.compile(rf"\bfrom (?P<x>{_SPAN}) (?P<p>to|into) (?P<y>{_SPAN})", re.I)
_VERB_TO = re.compile(
    r"\b(?P<v>convert|converting|translate|translating|change|changing|exchange|exchanging|"
    r"switch|switching|transfer|transferring|move|moving|turn|turning)"
    rf" (?P<x>{_SPAN}) (?P<p>to|into) (?P<y>{_WORDS})",
    re.I,
)
_ART = r"(?:(?:a|an|the|my) )?"
_THAN = re.compile(
    rf"\b(?P<x>{_WORDS}) (?P<p>\w+er than|more \w+ than|less \w+ than) {_ART}(?P<y>{_WORDS})", re.I
)
_SEQ = re.compile(rf"\b(?P<x>{_WORDS}) (?P<p>before|after) {_ART}(?P<y>{_WORDS})", re.I)
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w.])")
_ZH_FROM_TO = re.compile(r"从(?P<x>[^，。、,\s从到]{1,8})到(?P<y>[^，。、,\s从到]{1,8})")

_ANTONYMS = (
    ("activate", "deactivate"),
    ("enable", "disable"),
    ("increase", "decrease"),
    ("add", "remove"),
    ("lock", "unlock"),
    ("freeze", "unfreeze"),
    ("buy", "sell"),
    ("deposit", "withdraw"),
    ("accepted", "declined"),
    ("approved", "rejected"),
    ("maximum", "minimum"),
    ("open", "close"),
    ("start", "stop"),
    ("turn on", "turn off"),
    ("arrive", "leave"),
    ("earliest", "latest"),
    ("cheapest", "most expensive"),
    ("send", "receive"),
    ("sent", "received"),
    ("charge", "refund"),
)
_ANTONYM_RE = [
    (re.compile(rf"\b{re.escape(a)}\b", re.I), b) for x, y in _ANTONYMS for a, b in ((x, y), (y, x))
]
_NEGATED = {
    "can't": "can",
    "cannot": "can",
    "won't": "will",
    "don't": "do",
    "doesn't": "does",
    "didn't": "did",
    "isn't": "is",
    "aren't": "are",
    "wasn't": "was",
    "haven't": "have",
    "hasn't": "has",
    "shouldn't": "should",
    "couldn't": "could",
    "wouldn't": "would",
}
_NEGATED_RE = re.compile(rf"\b(?:{'|'.join(re.escape(k) for k in _NEGATED)})\b", re.I)
_AUX_RE = re.compile(
    r"(?<=\w )(?P<aux>is|are|was|were|did|does|do|can|will|should|has|have)"
    r" (?P<next>(?!(?:not|it|i|you|we|they|he|she|my|your|the|a|an|this|that|there)\b)[a-z]\w+)",
    re.I,
)
_ZH_POLARITY = (("可以", "不可以"), ("能", "不能"), ("是", "不是"), ("有", "没有"), ("会", "不会"))
# "能不能" / "有没有" / "可不可以" ask a yes-no question; dropping the negation leaves
# "能能", no opposite, so a pair with one is no negative.
# 能否 / 可否 / 是否 / 有无 ask the same in one word.
_ZH_A_NOT_A = re.compile(r"(可以?|能|是|有|会)[不没]\1|[能可是]否|有无")
# 是 before a question word is a copula ("费用是多少"): "不是多少" is no opposite.
_ZH_COPULA = re.compile(r"是(?=什么|多少|哪|怎么|谁|几|啥)")
# The plain word inside a longer one is not the verb: 功能, 可能, 还是, 是否, 所有,
# 有效, 会员, 机会 ... (adding 不 there makes no opposite, only a broken word).
_ZH_COMPOUND = {
    "能": (
        "功能",
        "可能",
        "智能",
        "性能",
        "技能",
        "才能",
        "本能",
        "能力",
        "能量",
        "能源",
        "只能",
        "节能",
        "万能",
        "无能",
    ),
    "是": (
        "还是",
        "就是",
        "可是",
        "但是",
        "于是",
        "总是",
        "或是",
        "只是",
        "要是",
        "正是",
        "凡是",
        "老是",
        "倒是",
        "是否",
        "硬是",
        "算是",
        "像是",
        "真是",
        "也是",
    ),
    "有": (
        "所有",
        "拥有",
        "具有",
        "含有",
        "持有",
        "只有",
        "有效",
        "有限",
        "有关",
        "有些",
        "有点",
        "有的",
        "有时",
        "有趣",
        "有用",
        "没有",
        "共有",
        "有人",
    ),
    "会": (
        "会员",
        "会议",
        "机会",
        "社会",
        "聚会",
        "约会",
        "开会",
        "会计",
        "一会",
        "会话",
        "工会",
        "年会",
        "协会",
        "会费",
        "宴会",
        "学会",
        "误会",
        "体会",
    ),
}


def _zh_plain_at(text: str, word: str) -> int:
    """Where ``word`` stands alone as the verb (inside none of its longer words), or -1."""
    for m in re.finditer(re.escape(word), text):
        i = m.start()
        if not any(
            text[j : j + len(c)] == c
            for c in _ZH_COMPOUND.get(word, ())
            for j in range(max(0, i + len(word) - len(c)), i + 1)
        ):
            return i
    return -1


def _ok(span: str) -> bool:
    return span.casefold() not in _STOP and span.split()[0].casefold() not in _STOP


def _swap(text: str, m: re.Match[str]) -> str | None:
    x, y = m.group("x"), m.group("y")
    if x.casefold() == y.casefold() or not (_ok(x) and _ok(y)):
        return None
    (xs, xe), (ys, ye) = m.span("x"), m.span("y")
    return text[:xs] + y + text[xe:ys] + x + text[ye:]


def direction(text: str) -> str | None:
    for pattern in (_FROM_TO, _VERB_TO):
        m = pattern.search(text)
        if m is not None and (out := _swap(text, m)) is not None:
            return out
    m = _ZH_FROM_TO.search(text)
    if m is not None and m.group("x") != m.group("y"):
        return text[: m.start()] + f"从{m.group('y')}到{m.group('x')}" + text[m.end() :]
    return None


def word_order(text: str) -> str | None:
    for pattern in (_THAN, _SEQ):
        m = pattern.search(text)
        if m is not None and (out := _swap(text, m)) is not None:
            return out
    numbers = list(_NUMBER.finditer(text))
    if len(numbers) >= 2 and numbers[0].group() != numbers[1].group():
        a, b = numbers[0], numbers[1]
        return (
            text[: a.start()] + b.group() + text[a.end() : b.start()] + a.group() + text[b.end() :]
        )
    return None


def polarity(text: str, rng: random.Random) -> str | None:
    """A negation added or removed, or an opposite verb; the choice among the
    rewrites that apply is made with ``rng``."""
    options: list[str] = []
    m = _NEGATED_RE.search(text)
    if m is not None:
        plain = _NEGATED[m.group().casefold()]
        options.append(text[: m.start()] + plain + text[m.end() :])
    m = re.search(r"\bnot (?=\w)", text, re.I)
    if m is not None:
        options.append(text[: m.start()] + text[m.end() :])
    m = _AUX_RE.search(text)
    if m is not None and not options:
        options.append(text[: m.end("aux")] + " not" + text[m.end("aux") :])
    for pattern, opposite in _ANTONYM_RE:
        m = pattern.search(text)
        if m is not None:
            options.append(text[: m.start()] + opposite + text[m.end() :])
            break
    if _ZH_A_NOT_A.search(text) is None:
        for plain, negated in _ZH_POLARITY:
            if negated in text:
                options.append(text.replace(negated, plain, 1))
                break
            if plain == "是" and _ZH_COPULA.search(text):
                continue
            if (i := _zh_plain_at(text, plain)) >= 0:
                options.append(text[:i] + negated + text[i + len(plain) :])
                break
    options = [o for o in options if o != text]
    return rng.choice(options) if options else None


def surface(text: str, rng: random.Random) -> str:
    """The same question with different case, end punctuation or a polite prefix."""
    out = text.rstrip("?!.。？！ ")
    if re.search(r"[\u4e00-\u9fff]", text):
        prefix = rng.choice(("", "请问", "你好，", "想问一下，"))
        return prefix + out + rng.choice(("", "？", "。"))
    choice = rng.randrange(3)
    if choice == 0:
        out = out.lower()
    elif choice == 1:
        out = out[:1].upper() + out[1:]
    else:
        out = (
            rng.choice(("Please tell me ", "Hi, ", "Quick question: ")) + out[:1].lower() + out[1:]
        )
    return out + rng.choice(("", "?", "??", "."))
