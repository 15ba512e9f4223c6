"""English questions that count the same things with the counts swapped.

"Can I have two cards on one account?" and "Can I have one card on two accounts?",
"Is there a fee for 3 transfers in 1 day?" and "... for 1 transfer in 3 days?": the
same numbers and the same nouns, each number counting the other noun. The number
kind compares the numbers as a set, so it sees {1, 2} twice, and the embedder and the
verifier read the two as one question (session 46's misfire hunt left this family
open). A pair is such a swap when both texts count at least two distinct nouns with
at least two distinct numbers, the numbers and the nouns are the same on both sides,
and which number counts which noun is not. Anything else is left to the other kinds:
a count that differs is the number kind's, and a text that counts one thing only
cannot swap.

A count is a number (digits, "a single", or number words up to ninety-nine: "twenty-five")
right before a word, after spaces or a hyphen ("two cards", "a 3-day hold"), that is not
a function or arithmetic word ("one of", "one more", "2 or 3", "75 plus 43" count
nothing); the noun is compared singular ("accounts" is "account", "IDs" "id", "people"
"person"). "one" after a word that makes it a pronoun ("which one", "a new one") counts
nothing. The noun counted is the last word of those that follow the number up to a
function word or a participle, three at most (since session 49: "two bank accounts"
counts "account", as "two accounts" does, so "two cards on one bank account" / "one card
on two accounts" is a swap; before, it counted "bank", and the verifier served it). The
word right after the number is read too, and a swap in either reading refuses: "six
Sydney actors and one Melbourne actor" swaps "Sydney" and "Melbourne", whose head is the
same.
Chinese is not read here: a Chinese swap keeps every character, and
``validators.roles_zh`` reads those around a relation word.
"""

from __future__ import annotations

import re
from collections import Counter

from validators.numbers import EN_TENS, EN_UNITS

_WORDS = {**EN_UNITS, **EN_TENS}
_UNIT = "|".join(sorted((w for w, v in EN_UNITS.items() if 0 < v < 10), key=len, reverse=True))
_NUMBER = "|".join(sorted(_WORDS, key=len, reverse=True))
# digits, "a single", "twenty-five" / "twenty five", or a number word; then "-" or spaces
# ("a 3-day hold") and the word counted
_WORD = r"[a-z][a-z'’]*(?:-[a-z][a-z'’]*)*"  # "carry-on" is one word
_COUNT = re.compile(
    rf"(?<![A-Za-z0-9.,$€£¥-])(\d+|a\s+single|(?:{'|'.join(EN_TENS)})[\s-](?:{_UNIT})(?![a-z])"
    rf"|{_NUMBER})(\s*-\s*|\s+)({_WORD})(?![A-Za-z0-9])"
    # the next two words, looked at and not taken (a count may follow: "on one account")
    rf"(?=((?:\s+{_WORD}){{0,2}}))",
    re.I,
)
# Words after a number that are not what it counts, and words before "one" that make it
# a pronoun.
_NOT_COUNTED = frozenset({
    "of", "or", "and", "to", "in", "on", "at", "for", "from", "by", "with", "per", "a",
    "an", "the", "more", "less", "than", "times", "time", "x", "out", "off", "up", "over",
    "under", "about", "each", "plus", "minus", "divided", "multiplied", "added",
})  # fmt: skip
_PRONOUN_BEFORE = frozenset({
    "a", "an", "the", "this", "that", "which", "what", "each", "every", "any", "no", "some",
    "new", "another", "other", "same", "such", "whichever", "next", "last", "right",
    "wrong",
})  # fmt: skip


# Where the words after a number stop being its noun phrase ("two cards on one account",
# "two cards i have").
_PHRASE_ENDS = frozenset({
    *_NOT_COUNTED, "is", "are", "was", "were", "be", "been", "do", "does", "did", "can",
    "could", "will", "would", "should", "may", "might", "must", "have", "has", "had", "i",
    "you", "we", "they", "he", "she", "it", "my", "your", "our", "their", "that", "which",
    "who", "if", "but", "so", "as", "into", "onto", "between", "than", "when", "where",
    "while", "because", "open", "left", "total", "only", "ago", "later", "now", "today",
    "tomorrow", "tonight", "yesterday", "free", "each", "every", "instead", "too", "again",
})  # fmt: skip


def _head(words: list[str]) -> str:
    """The noun of a count's phrase: its last word before a function word or a past or
    present participle (which says what happens to it: "one card arrived")."""
    head = words[0]
    for word in words[1:]:
        if word in _PHRASE_ENDS or word.endswith(("ed", "ing")) or word in _WORDS:
            break
        head = word
    return head


_IRREGULAR = {"people": "person", "children": "child", "men": "man", "women": "woman"}


def _singular(word: str) -> str:
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "sses", "xes", "uses")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 2:
        return word[:-1]  # "ids" too
    return word


def _value(number: str) -> int:
    if number.isdigit():
        return int(number)
    if number.startswith("a"):  # "a single"
        return 1
    return sum(_WORDS[w] for w in re.split(r"[\s-]+", number))  # "twenty-five": 20 + 5


def counts(text: str, *, head: bool = True) -> list[tuple[int, str]]:
    """The (number, singular noun) counts of ``text``, in order: the noun the phrase's
    last word (``head``) or the word right after the number."""
    out: list[tuple[int, str]] = []
    lowered = text.lower()
    for m in _COUNT.finditer(lowered):
        number, joined = m.group(1), "-" in m.group(2)
        first = m.group(3).replace("’", "'")
        if first in _NOT_COUNTED or first in _WORDS or first.isdigit():
            continue
        # "a 3-day hold" counts days: a number joined to its word makes an adjective
        rest = m.group(4).replace("’", "'").split()
        noun = _head([first, *rest]) if head and not joined else first
        if number == "one":
            before = re.findall(r"[a-z]+", lowered[max(0, m.start() - 20) : m.start()])
            if before and before[-1] in _PRONOUN_BEFORE:
                continue
        out.append((_value(number), _singular(noun)))
    return out


def swapped_counts(a: str, b: str) -> bool:
    """Whether ``b`` counts the nouns ``a`` counts, with the same numbers, each number
    counting another noun (the module docstring)."""
    return _swapped(counts(a), counts(b)) or _swapped(
        counts(a, head=False), counts(b, head=False)
    )  # each reading: "six Sydney actors and one Melbourne actor" swaps the first words


def _swapped(ca: list[tuple[int, str]], cb: list[tuple[int, str]]) -> bool:
    if len(ca) < 2 or len(cb) < 2:
        return False
    numbers, nouns = Counter(n for n, _ in ca), Counter(w for _, w in ca)
    if len(numbers) < 2 or len(nouns) < 2:
        return False
    if numbers != Counter(n for n, _ in cb) or nouns != Counter(w for _, w in cb):
        return False
    return Counter(ca) != Counter(cb)
