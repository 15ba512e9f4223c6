"""Which Latin-script questions read as another language than English
(semantic/latin_language.py): both ways, names, the vocabulary signal, long input."""

from __future__ import annotations

import pytest

from semantic.latin_language import (
    MAX_CHARS,
    bundled_english_words,
    foreign_language,
    is_non_english,
    vocabulary_words,
)

FOREIGN = [
    ("¿Cómo cambio mi contraseña?", "es"),
    ("como cambio mi contrasena", "es"),
    ("Je voudrais annuler ma commande", "fr"),
    ("Wo ist meine Bestellung?", "de"),
    ("Wie funktioniert das Online-Banking?", "de"),
    ("Qual è il tasso di cambio?", "it"),
    ("Perdi meu cartão", "pt"),
    ("Hoe laat gaan jullie open?", "nl"),
    # a sentence-initial capital after a full stop is grammar, not a name
    ("Esqueci a minha senha. Como recupero?", "pt"),
    ("Làm thế nào để đổi mật khẩu?", "vi"),  # the letters only Vietnamese writes
    # case says nothing in a text all in capitals or all capitalised: read as lowercase
    ("NECESITO AYUDA CON MI TARJETA DE CREDITO QUE NO FUNCIONA", "es"),
    ("Necesito Ayuda Con Mi Tarjeta De Credito Que No Funciona", "es"),
    ("l'heure d'ouverture", "fr"),  # elisions
]
ENGLISH = [
    "How do I reset my password?",
    "What is the capital of France?",
    "Where is El Paso?",  # capitalised inside the sentence: a name
    "Is Der Spiegel a newspaper?",
    "las vegas weather today",  # a place name English writes lowercase too
    "How far is Los Angeles from San Diego?",
    "see ya later",
    "Evonne Goolagong defeated Françoise Dürr 6 -- 4 , 6 -- 2 .",
    "what does carpe diem mean",
    "Where is Đà Nẵng?",  # a name, capitalised: no evidence
    "HOW DO I RESET MY PIN",
    # short queries with a name: an article before a capital, a particle between two,
    # an acronym, an apostrophe that is no elision, one-letter words, a mark alone
    "Van Gogh paintings",
    "Del Taco menu",
    "De Niro movies",
    "Tour de France winner",
    "Cirque du Soleil tickets",
    "LA Lakers score",
    "O'Reilly hours",
    "what time is it, 5 o'clock?",
    "D'Angelo songs",
    "Y combinator",
    "u up",
    "per diem rates",
    "pâté recipe",
    "piñata",
    "",
    "???",
]


@pytest.mark.parametrize(("text", "lang"), FOREIGN)
def test_other_languages_are_found(text: str, lang: str) -> None:
    assert foreign_language(text) == lang
    assert is_non_english(text, bundled_english_words())


@pytest.mark.parametrize("text", ENGLISH)
def test_english_is_english(text: str) -> None:
    assert foreign_language(text) is None
    assert not is_non_english(text, bundled_english_words())


def test_the_vocabulary_reads_keyword_queries_without_function_words() -> None:
    words = bundled_english_words()
    assert "password" in words and "##ing" not in words and "[UNK]" not in words
    for text in ("Karte verloren", "tarjeta perdida", "Wachtwoord vergeten"):
        assert foreign_language(text) is None  # no function word to tell
        assert is_non_english(text, words)
    # English keyword queries stay English, typos and rare words included
    for text in ("reset pin", "card declined abroad", "top up failed", "define antebellum"):
        assert not is_non_english(text, words)


def test_vocabulary_words_skip_pieces_and_specials() -> None:
    assert vocabulary_words(["[CLS]", "##s", "card", "", "pin"]) == frozenset({"card", "pin"})


def test_only_the_start_of_a_long_text_is_read() -> None:
    english = "How do I reset my password? " * 200
    assert len(english) > MAX_CHARS
    assert not is_non_english(english + "¿Cómo cambio mi contraseña? " * 100)
    assert is_non_english("¿Cómo cambio mi contraseña? " * 200)
