"""Is a question in Latin script written in a language other than English?

The bundled MiniLM was trained on English. Its WordPiece vocabulary spells a Spanish
or German question out of known pieces, so its coverage of letters is full, yet what
its vector means there was never measured, nor the English pair verifier's score. A
language an embedder does not cover must never be served from the cache (issue 12),
so :class:`semantic.embedder.Embedder` counts such a question as not covered: under
``minilm`` it is neither served nor stored (``unsupported_text``); under ``auto`` it
goes to the multilingual e5, and the gateway's pair verifier sends its pairs to the
multilingual cross-encoder (``validators/verifier_languages.py``).

Three signals, each one that English text does not give:

* **function words**, the short words every sentence of a language needs and English
  does not have ("el", "los", "qué"; "les", "pour"; "der", "und", "nicht"; "il",
  "della"; "não", "uma"; "het", "ik", "mijn"). A question is non-English when it holds
  more of them than English ones and at least :data:`MIN_FOREIGN`, or, when short, at
  least one and no English one. Words both languages share ("a", "in", "me", "is",
  "die", "come") count for English only;
* **letters** English does not write in its own words: ¿ ¡ ñ ß ã õ œ, and the tone
  and horn letters of Vietnamese;
* **the vocabulary** of an English model (:func:`vocabulary_words`): a question with
  no more English function words than foreign ones whose words are mostly unknown to
  it ("Karte verloren", "tarjeta perdida", "Wachtwoord vergeten").

A word capitalised inside a sentence is a name ("El Paso", "Der Spiegel", "Françoise
Dürr") and is no evidence, as are an article before a capital at the start ("Van Gogh
paintings"), a particle between two capitals ("Tour de France") and a short acronym
("LA Lakers"), and a few place names English writes in lowercase ("las vegas"). Case
says nothing in a text all in capitals or all capitalised: it is read as lowercase.
Measured by ``bench/latin_language_eval.py`` (session 27): 3 of the 40,446 English
questions of the shared data read as another language ("ahoy hoy", "merci beaucoup",
"mashed potato's nutrition"; short lowercase queries such as "la liga standings" would
too); of 720 questions written in Spanish, French, German, Italian, Portuguese and
Dutch, 89.2% of the half looked at while writing this and 92.5% of the other half are
found. What is missed is mostly two-word queries of loanwords ("PIN gesperrt", "Apple
Pay einrichten"): those stay with MiniLM and the English verifier, as every such
question did before.

:func:`foreign_languages` also says which languages: the codes with the most votes of
function words (empty when letters or the vocabulary alone told), so that two
questions with disjoint sets are in different languages. It is a guess (the first code
is the right one for 61–91% of the found questions of a language): only disjoint sets
count as two languages.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Container, Iterable
from dataclasses import dataclass

__all__ = [
    "MIN_FOREIGN",
    "RULE_VERSION",
    "UNKNOWN_SHARE",
    "foreign_language",
    "foreign_languages",
    "is_non_english",
    "vocabulary_words",
]

#: The version of this rule. Which questions it finds decides which embedder ``auto``
#: gives them, so it is part of the routed embedder's id: change it with the rule.
RULE_VERSION = "en1"
#: Foreign function words a question needs (with more of them than English ones).
MIN_FOREIGN = 2
#: A question of at most this many words is non-English on one foreign function word
#: and no English one ("horario de apertura", "mot de passe oublié").
SHORT_WORDS = 5
#: With an English vocabulary given: a question with no English function word whose
#: words of three letters or more are at least this share unknown to it (and at least
#: two of them) is non-English: "Karte verloren", "tarjeta perdida", "merci beaucoup".
UNKNOWN_SHARE = 0.6

# fmt: off
_FUNCTION_WORDS: dict[str, str] = {
    "es": "el la los las de del al en un que qué por para con una unos unas cómo cuál "
          "cuáles cuándo dónde cuánto cuánta cuántos mi mis tu tus su sus es está están "
          "hay puedo puede quiero necesito tengo mí usted ustedes hacer se lo le les y o "
          "pero también muy más este esta estos ese esa cuando donde como cual cuanto sin "
          "sobre entre hasta",
    "fr": "le la les de des du en un est une pour avec comment quel quelle quels quelles "
          "je mon ma mes ton ta tes votre vos nous vous il elle ils sont ne pas et où ou "
          "sur dans puis peux peut faire quand pourquoi aux au ce cette ces qui qu que j c "
          "est-ce l d",
    "de": "der die das den dem des und ist ich wie nicht ein eine einen einem einer mein "
          "meine meinen meinem kann können mit für auf wann wo warum sie wir ihr ihre zu "
          "von bitte was wird werden gibt habe hat noch auch aber oder bei nach aus",
    "it": "il la le lo gli di della dello delle degli che per come posso mio mia miei mie "
          "è non sono dove quando perché con del da dal alla al una uno un ho hai ha si ci "
          "nel nella questo questa anche più fare",
    "pt": "o a de os as da do das dos que para com uma um como meu minha meus minhas não "
          "posso onde quando é está em no na nos nas pelo pela você vocês eu fazer tem há "
          "também mais ao à e ou seu sua",
    "nl": "de het een en is van ik mijn hoe kan niet wat waar wanneer met voor op te je "
          "jij u uw zijn er dat deze dit ook maar of naar bij om hebben heb wil moet",
}
# English function words. Those the lists above share ("a", "in", "me", "is") count for
# English only, as do a few more English words they hold ("die", "come", "hat", "war").
_ENGLISH_WORDS = (
    "per via the a an is are was were be been am my i me you your how what which who whom do "
    "does did can could to of in for on with it its this that these those and or not no "
    "when where why have has had will would should may might there their they we our us "
    "from at by about as if so but get any some all much many more please"
)
# fmt: on
_ENGLISH = frozenset(_ENGLISH_WORDS.split())
_NOT_FOREIGN = _ENGLISH | {"die", "come", "also", "war", "hat"}
_FOREIGN: dict[str, frozenset[str]] = {
    word: frozenset(lang for lang, words in _FUNCTION_WORDS.items() if word in words.split())
    for word in {w for words in _FUNCTION_WORDS.values() for w in words.split()} - _NOT_FOREIGN
}

# Place names English writes with another language's article: read as one name, not grammar.
_NAMES = re.compile(
    r"\b(?:las vegas|las cruces|los angeles|los alamos|los cabos|el paso|el salvador"
    r"|la paz|la jolla|la crosse|des moines|le mans|del mar|del rio)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
# Marks English does not write in its own words: ¿ ¡ and the letters of other alphabets.
_MARKS = re.compile(r"[¿¡ñÑßãõÃÕœŒ]")
# Letters only Vietnamese writes (horn, stroke; tone marks stacked or dotted below): a
# word holding one, unless a name, is a Vietnamese word. (â and ă are French, Romanian
# and Portuguese too, and English borrows them: "pâté".)
_VIETNAMESE = re.compile(r"[đơưĐƠƯ\u1ea0-\u1ef9]")
# French and Italian elisions: l'heure, qu'est, c'est, dell'anno (not O'Reilly, o'clock).
_ELISION = re.compile(r"^(l|d|j|c|qu|n|s|m|t|dell|all|nell|dall|sull)['’](?=[^\W\d_])")
# What ends a sentence: a capital after it starts one, and is no name.
_SENTENCE_ENDS = frozenset(".?!¿¡:;…–—")
#: Words (and characters) read at most: a question says its language in its first
#: sentences, and a long text costs no more than a short one.
MAX_WORDS = 200
MAX_CHARS = 2000


@dataclass(frozen=True)
class _Word:
    text: str
    lower: str
    is_name: bool  # capitalised inside a sentence, or written as an acronym


def _words(text: str) -> list[_Word]:
    """The words of ``text``, each with whether it is a name. The name rule reads case,
    so it holds only where case says something: not in a text without lowercase letters
    ("NECESITO AYUDA …") nor in one of three words or more all capitalised ("Necesito
    Ayuda Con Mi Tarjeta"), which are read as if lowercase."""
    found: list[tuple[str, bool]] = []  # (word, starts a sentence)
    for m in _WORD.finditer(text):
        k = m.start() - 1
        while k >= 0 and text[k].isspace():
            k -= 1
        found.append((m.group(), k < 0 or text[k] in _SENTENCE_ENDS))
        if len(found) >= MAX_WORDS:
            break
    capitalised = sum(w[:1].isupper() for w, _ in found)
    cased = any(c.islower() for c in text) and (capitalised < len(found) or len(found) <= 2)
    out: list[_Word] = []
    for n, (word, starts) in enumerate(found):
        name = False
        if cased and word[:1].isupper():
            after = found[n + 1][0] if n + 1 < len(found) else ""
            acronym = word.isupper() and len(word) <= 3  # "LA Lakers", "EL"
            # inside a sentence, or a capitalised word before another: "Van Gogh" at the start
            name = acronym or not starts or after[:1].isupper()
        out.append(_Word(word, word.lower(), name))
    return out


def _fold(word: str) -> str:
    """Lowercase without accents, as an uncased English WordPiece vocabulary reads it."""
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def foreign_languages(text: str, vocabulary: Container[str] | None = None) -> frozenset[str] | None:
    """None when ``text`` reads as English (or says too little), else the languages its
    function words point to: the codes with the most votes, empty when only letters or
    ``vocabulary`` (the whole words an English model knows, lowercase) tell it is not
    English. Two questions whose sets are disjoint are in different languages."""
    words = _words(_NAMES.sub(" Name ", text[:MAX_CHARS]))
    if not words:
        return None
    votes: dict[str, int] = {}
    foreign = english = long_foreign = 0
    for n, word in enumerate(words):
        lower = word.lower
        for part in re.split(r"['’]", lower):
            if part in _ENGLISH:
                english += 1
        if word.is_name:
            continue
        after = words[n + 1] if n + 1 < len(words) else None
        langs = _FOREIGN.get(lower)
        elided = _ELISION.match(lower) if langs is None else None
        if elided is not None and word.text[elided.end()].islower():  # not "D'Angelo"
            langs = _FOREIGN.get(elided.group(1))
        before = words[n - 1] if n else None
        # "Tour de France", "Cirque du Soleil": a particle between two capitals is a name's
        if langs and after is not None and after.is_name and before and before.text[:1].isupper():
            langs = None
        if langs is None and _VIETNAMESE.search(word.text):
            langs = frozenset({"vi"})
        if langs:
            foreign += 1
            long_foreign += len(lower) >= 2
            for lang in langs:
                votes[lang] = votes.get(lang, 0) + 1
    # A short query needs a function word of two letters or more ("Y combinator", "u up");
    # a mark alone is not enough there ("piñata", "jalapeño poppers").
    short = len(words) <= SHORT_WORDS and long_foreign >= 1 and english == 0
    if _MARKS.search(text[:MAX_CHARS]) and english == 0:
        foreign += 1
    found = short or (foreign >= MIN_FOREIGN and foreign > english)
    unknown = vocabulary is not None and english <= foreign
    if not found and not (unknown and _mostly_unknown(words, vocabulary or ())):
        return None
    if not votes:
        return frozenset()
    top = max(votes.values())
    return frozenset(lang for lang, count in votes.items() if count == top)


def foreign_language(text: str, vocabulary: Container[str] | None = None) -> str | None:
    """One code for :func:`foreign_languages` (the first in order of a tie; ``"und"``
    when no function word tells which), or None for English."""
    langs = foreign_languages(text, vocabulary)
    if langs is None:
        return None
    return min(langs) if langs else "und"


def _mostly_unknown(words: list[_Word], vocabulary: Container[str]) -> bool:
    # Names are no evidence: "Françoise Dürr" is English too.
    content = [_fold(w.text) for w in words if len(w.text) >= 3 and not w.is_name]
    unknown = sum(w not in vocabulary for w in content)
    return len(content) >= 2 and unknown >= UNKNOWN_SHARE * len(content)


def is_non_english(text: str, vocabulary: Container[str] | None = None) -> bool:
    """Whether ``text`` reads as a language other than English (see the module)."""
    return foreign_languages(text, vocabulary) is not None


def vocabulary_words(tokens: Iterable[str]) -> frozenset[str]:
    """The whole words of a WordPiece vocabulary (not ``##`` pieces, not ``[SEP]``-like
    specials), as :func:`foreign_language` takes them."""
    return frozenset(t for t in tokens if t and not t.startswith(("##", "[")))


def bundled_english_words() -> frozenset[str]:
    """The whole words of the bundled all-MiniLM-L6-v2 vocabulary (its ``vocab.txt``; the
    pair verifier's English cross-encoder, fine-tuned from it, reads the same)."""
    global _BUNDLED
    if _BUNDLED is None:
        from semantic.model_files import bundled_model_path

        lines = (bundled_model_path() / "vocab.txt").read_text(encoding="utf-8").splitlines()
        _BUNDLED = vocabulary_words(line.strip() for line in lines)
    return _BUNDLED


_BUNDLED: frozenset[str] | None = None
