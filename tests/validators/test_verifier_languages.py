"""Which pairs the verifier reads as one language and which as two
(validators/verifier_languages.py), with a stated reader: no model, no torch."""

from __future__ import annotations

from validators.verifier_languages import PairLanguages

READ: dict[str, frozenset[str] | None] = {
    "How do I reset my PIN?": None,
    "¿Cómo cambio mi PIN?": frozenset({"es"}),
    "Cancelar pedido": frozenset({"es", "pt"}),  # two languages write it so
    "Cancelar encomenda": frozenset({"pt"}),
    "Comment changer mon code ?": frozenset({"fr"}),
    "Karte verloren": frozenset(),  # not English; which language, not known
}


def reader(calls: list[str]) -> PairLanguages:
    def read(text: str) -> frozenset[str] | None:
        calls.append(text)
        return READ[text]

    return PairLanguages(read)


def test_pairs_both_ways() -> None:
    langs = reader([])
    assert langs.pair("How do I reset my PIN?", "How do I reset my PIN?") is None  # English
    assert langs.pair("¿Cómo cambio mi PIN?", "Cancelar pedido") == "foreign"  # may share es
    assert langs.pair("Cancelar pedido", "Cancelar encomenda") == "foreign"  # may share pt
    assert langs.pair("Karte verloren", "¿Cómo cambio mi PIN?") == "foreign"  # unknown: may
    # two languages: an answer in the other one
    assert langs.pair("¿Cómo cambio mi PIN?", "How do I reset my PIN?") == "mismatch"
    assert langs.pair("How do I reset my PIN?", "Karte verloren") == "mismatch"
    assert langs.pair("¿Cómo cambio mi PIN?", "Comment changer mon code ?") == "mismatch"
    assert langs.pair("Cancelar encomenda", "¿Cómo cambio mi PIN?") == "mismatch"


def test_latin_against_chinese() -> None:
    langs = reader([])
    assert langs.latin_against_chinese("¿Cómo cambio mi PIN?", "怎么修改密码")
    assert langs.latin_against_chinese("怎么修改密码", "Karte verloren")
    # English against Chinese is left as it was (the Chinese path reads both)
    assert not langs.latin_against_chinese("怎么修改密码", "How do I reset my PIN?")
    assert not langs.latin_against_chinese("怎么修改密码", "如何更改密码")


def test_each_text_is_read_once_and_no_reader_reads_nothing() -> None:
    calls: list[str] = []
    langs = reader(calls)
    for other in ("Cancelar pedido", "Cancelar encomenda", "How do I reset my PIN?"):
        langs.pair("¿Cómo cambio mi PIN?", other)
    assert calls.count("¿Cómo cambio mi PIN?") == 1
    none = PairLanguages(None)
    assert none.pair("¿Cómo cambio mi PIN?", "How do I reset my PIN?") is None
    assert not none.latin_against_chinese("¿Cómo cambio mi PIN?", "怎么修改密码")
