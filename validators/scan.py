"""The span scanner every extractor runs on.

Extractors run in a fixed order, most specific first. Each accepted match is
recorded as one or more ``EntitySpan`` and its characters are *masked* (turned
into NUL) in the working copy, so later, more generic extractors cannot read
the same characters again: the ``20`` of ``$20`` is an amount, never also a
plain number, and the ``12345`` of ``order 12345`` is an identifier only.
NUL never occurs in prepared text (``validators.text.prepare`` removes control
characters), is not a word character and not whitespace, so masked spans act
as hard boundaries for every pattern.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

MASK = "\x00"

Handler = Callable[[re.Match[str]], Iterable[tuple[str, str]] | None]


@dataclass(frozen=True, slots=True)
class EntitySpan:
    """One extracted value: its kind, canonical value and where it was read."""

    kind: str
    value: str
    start: int
    end: int
    text: str


class Scanner:
    """Holds the prepared text, the masked working copy and what was found."""

    __slots__ = ("found", "text", "words", "work")

    def __init__(self, text: str) -> None:
        self.text = text
        self.work = text
        self.found: list[EntitySpan] = []
        #: spans masked as words that only look like values (:meth:`drop` with
        #: ``words=True``): the rules that read words may still read them
        self.words: list[tuple[int, int]] = []

    def take(self, pattern: re.Pattern[str], handler: Handler) -> None:
        """Run ``pattern`` over the working copy. For each match the handler
        returns ``None`` (not an entity: leave the characters for later
        extractors) or ``(kind, value)`` pairs (possibly none: consume the
        characters without recording anything). Accepted matches are masked."""
        spans: list[tuple[int, int]] = []
        for m in pattern.finditer(self.work):
            if m.end() == m.start():
                continue
            values = handler(m)
            if values is None:
                continue
            for kind, value in values:
                self.found.append(
                    EntitySpan(kind, value, m.start(), m.end(), self.text[m.start() : m.end()])
                )
            spans.append((m.start(), m.end()))
        self.mask(spans)

    def record(self, kind: str, value: str, start: int, end: int) -> None:
        """Record a value read at ``start:end`` without masking it."""
        self.found.append(EntitySpan(kind, value, start, end, self.text[start:end]))

    def drop(self, pattern: re.Pattern[str], *, words: bool = False) -> None:
        """Mask every match of ``pattern`` without recording anything
        (greetings, hedges, lexicalized words that only look like entities). With
        ``words``, the spans are words (二手, 第一次) that :meth:`words_unmasked` gives
        back to the rules that read words."""
        spans = [(m.start(), m.end()) for m in pattern.finditer(self.work)]
        if words:
            self.words += spans
        self.mask(spans)

    def words_unmasked(self, work: str) -> str:
        """``work`` (a copy of the working text) with the :meth:`drop` ``words`` spans
        read again from the text."""
        # one pass, not a copy of the text a span (a long text of 第一次 has thousands)
        parts: list[str] = []
        pos = 0
        for start, end in sorted(self.words):
            start = max(start, pos)
            parts += [work[pos:start], self.text[start:end]]
            pos = max(pos, end)
        parts.append(work[pos:])
        return "".join(parts)

    def mask(self, spans: Iterable[tuple[int, int]]) -> None:
        spans = sorted(spans)
        if not spans:
            return
        parts: list[str] = []
        pos = 0
        for start, end in spans:
            start = max(start, pos)
            if end <= start:
                continue
            parts.append(self.work[pos:start])
            parts.append(MASK * (end - start))
            pos = end
        parts.append(self.work[pos:])
        self.work = "".join(parts)


def one(kind: str, value: str | None) -> list[tuple[str, str]] | None:
    """Handler helper: a single value, or ``None`` to reject the match."""
    return None if value is None else [(kind, value)]
