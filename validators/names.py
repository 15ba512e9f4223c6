"""Proper nouns: the people, companies, brands and places a question names.

Kind ``name``: every Titlecase word (``Alice``, ``Acme``, ``Nike``, ``PayPal``) that
does not open a sentence, lower-cased, with a possessive ``'s`` dropped (``Nike's`` →
``nike``). "Who is the CEO of Acme?" → ``{"acme"}``; "Document: Alice is the CEO of
Acme." → ``{"alice", "acme"}``. Not read as names:

* the first word of the text, of a sentence (after ``.``, ``?``, ``!``) or of a line,
  since capitals there say nothing; a name that opens a sentence is missed, which is
  the safe direction for recall and the accepted gap for refusals;
* a label before a colon (``Question:``, ``Context:``);
* function words, greetings and question words a title or a prompt scaffold may
  capitalise mid-sentence (``STOPWORDS``: "Question: How do I …", "Hi, What is …");
* words of a text written in Title Case (most of its words capitalised: a headline,
  not names), and upper-case acronyms (``CEO``, ``PIN``): neither tells a name apart;
* any word of a text holding Chinese characters, which often write a name in Latin
  letters on one side and in characters on the other ("Apple Pay" / "苹果支付").

**Rule** (:func:`compare_names`). Equal sets match. Otherwise a name on one side only
is *explained* when the other text holds the same word in any case, or its plural or
singular (its ``mentions``, with the parts of hyphenated words): "What is the return
policy for Nike shoes?" against "nike shoes return policy" match; "… for Adidas
shoes?" does not. The comparison matches when every one-sided name is explained.
Without the other side's mentions (entities built by hand), a one-sided name refuses.
A language named as one ("answer in Japanese") is the ``language`` kind
(``validators.languages``, which runs first); a capitalised nationality ("is Chinese
food healthy?") is a name.
"""

from __future__ import annotations

import re
from collections.abc import Set

from validators.places import CITY_IDS, find_places
from validators.scan import Scanner

#: Distinct words kept as a text's mentions; a longer text keeps none (its names can
#: only match equal names), so a stored document does not carry thousands of words.
MAX_MENTIONS = 1000

_WORD = re.compile(r"(?<![A-Za-z0-9_'])[A-Za-z][A-Za-z'-]*(?<!['-])")
_TITLE = re.compile(r"(?<![A-Za-z0-9_'\x00-])(?:[A-Z][a-z]+)+(?:'s)?(?![A-Za-z0-9_\x00])")
# A text with Chinese characters often writes a name in Latin letters on one side and
# in characters on the other ("Apple Pay" / "苹果支付"): no names are read in it.
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_SENTENCE_END = frozenset(".?!\n。？！")
# What may stand between a sentence end and its first word: spaces, quotes, brackets, bullets.
_OPENERS = frozenset(" \t\"'([{*-•>#")
_TITLE_CASE_SHARE = 0.6

_STOPWORDS = """
    a an the this that these those my your our his her their its it i me we you he she they
    them us what which who whom whose why when where how whether is are was were be been
    being am do does did done have has had can could will would shall should may might must
    and or but nor so if then than as at by for from in into of on onto to with without
    about above after before under over up down out off not no yes please thanks thank hi
    hello hey dear ok okay also just any all some each every there here now very
    sir madam mr mrs ms dr
"""
STOPWORDS = frozenset(_STOPWORDS.split())


def _is_sentence_start(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END


def _word(token: str) -> str:
    return token.lower().removesuffix("'s")


def mentions(text: str) -> frozenset[str] | None:
    """Every word of ``text``, lower-cased without a possessive ``'s``, and the parts of
    a hyphenated one ("Receiver-General" also gives "receiver", "general"); None when
    the text holds more than ``MAX_MENTIONS`` distinct words."""
    words: set[str] = set()
    for m in _WORD.finditer(text):
        word = _word(m.group())
        words.add(word)
        if "-" in word:
            words.update(part for part in word.split("-") if part)
    return frozenset(words) if len(words) <= MAX_MENTIONS else None


def _stem(word: str) -> str:
    """A plural's singular, roughly: "films" and "film" explain each other."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _title_cased(text: str) -> bool:
    """Most words that do not open a sentence are capitalised (acronyms not counted)."""
    words = [
        m.group()
        for m in _WORD.finditer(text)
        if not m.group().isupper() and not _is_sentence_start(text, m.start())
    ]
    if len(words) < 3:
        return False
    capitalised = sum(1 for w in words if w[0].isupper())
    return capitalised >= _TITLE_CASE_SHARE * len(words)


def extract_names(scan: Scanner) -> None:
    """The ``name`` values of the text's Titlecase words (module docstring). Names are
    recorded, not masked: nothing runs after this extractor."""
    if _HAN.search(scan.text) or _title_cased(scan.text):
        return
    # Places are the polarity kind's (validators/places.py: any case, one id for every
    # spelling, refused only when both texts name places and not the same ones)
    # but a capitalised city is a name as it was before cities were places
    places = [(s, e) for place, s, e in find_places(scan.work) if place not in CITY_IDS]
    for m in _TITLE.finditer(scan.work):
        if any(start < m.end() and m.start() < end for start, end in places):
            continue
        word = _word(m.group())
        if len(word) < 2 or word in STOPWORDS or _is_sentence_start(scan.text, m.start()):
            continue
        if scan.text[m.end() : m.end() + 1] == ":":  # a label: "Context: …"
            continue
        scan.record("name", word, m.start(), m.end())


def compare_names(
    left: Set[str],
    right: Set[str],
    left_mentions: Set[str] | None,
    right_mentions: Set[str] | None,
) -> bool:
    """True when every name of one side is a name or a word of the other."""
    if left == right:
        return True
    for names, other_mentions in ((left - right, right_mentions), (right - left, left_mentions)):
        if not names:
            continue
        if other_mentions is None:
            return False
        stems = {_stem(w) for w in other_mentions}
        if any(_stem(name) not in stems for name in names):
            return False
    return True
