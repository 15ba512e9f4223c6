"""Which pairs the pair verifier reads as one language, and which as two.

``PairVerifier(foreign_languages=...)`` takes a reader that says, for a question in
Latin script, None when it is English, else the languages it may be in (the gateway
passes ``semantic.latin_language.foreign_languages``; ``validators`` does not import
``semantic``). :class:`PairLanguages` applies it to the pairs of one route call: a pair
of two such questions that may share a language goes to the multilingual
cross-encoder; a pair in two languages is refused (``language_mismatch``), since its
cached answer is in the other language.
"""

from __future__ import annotations

from collections.abc import Callable

from validators import verifier_zh

__all__ = ["PairLanguages"]


class PairLanguages:
    """The languages of a route call's questions (``PairVerifier(foreign_languages=)``),
    each read once: the new question is in every pair."""

    def __init__(self, read: Callable[[str], frozenset[str] | None] | None) -> None:
        self.read = read
        self.known: dict[str, frozenset[str] | None] = {}

    def of(self, text: str) -> frozenset[str] | None:
        assert self.read is not None
        if text not in self.known:
            self.known[text] = self.read(text)
        return self.known[text]

    def pair(self, a: str, b: str) -> str | None:
        """None: both English (or no reader); ``"foreign"``: both in a language that may
        be the same; ``"mismatch"``: two languages."""
        if self.read is None:
            return None
        la, lb = self.of(a), self.of(b)
        if la is None and lb is None:
            return None
        if la is None or lb is None or (la and lb and not la & lb):
            return "mismatch"
        return "foreign"

    def latin_against_chinese(self, a: str, b: str) -> bool:
        """One side Chinese, the other a Latin-script question in another language (both
        in e5's part of ``auto``'s space): two languages."""
        if self.read is None or verifier_zh.is_chinese(a) == verifier_zh.is_chinese(b):
            return False
        other = b if verifier_zh.is_chinese(a) else a
        return verifier_zh.mostly_latin(other) and self.of(other) is not None
