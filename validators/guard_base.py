"""The building blocks of the scenario guards (validators.guards): a guard is an
ordered list of rules; a rule is a regular expression (or an entity kind) that
names the phrase it matched, so every refusal can be explained."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from validators.entities import find_entities
from validators.scan import EntitySpan
from validators.text import prepare

NOCASE = re.IGNORECASE
A = r"(?<![A-Za-z])"
Z = r"(?![A-Za-z])"


def en_words(words: str) -> str:
    return rf"{A}(?:{words}){Z}"


@dataclass(frozen=True, slots=True)
class GuardMatch:
    """Why a guard fired: the guard, the rule inside it and the matched phrase
    (``start``/``end`` index the NFKC-normalized text)."""

    guard: str
    rule: str
    phrase: str
    start: int
    end: int

    @property
    def reason(self) -> str:
        return f"guarded:{self.guard}"

    def to_dict(self) -> dict[str, Any]:
        return {"guard": self.guard, "rule": self.rule, "phrase": self.phrase,
                "start": self.start, "end": self.end}  # fmt: skip


class Searcher(Protocol):
    """What a rule matches with: a compiled regex, or anything that searches like one."""

    def search(self, string: str, /) -> re.Match[str] | None: ...


@dataclass(frozen=True, slots=True)
class GuardRule:
    """A regex rule, or (``entity_kinds`` set) a rule that fires when the
    entity extractor finds one of those kinds in the text. ``unless`` matching
    anywhere in the text keeps the rule quiet (a procedural frame such as "how
    do I" turns "my balance" from the asker's data into a how-to question)."""

    name: str
    pattern: Searcher | None = None
    entity_kinds: frozenset[str] = frozenset()
    unless: re.Pattern[str] | None = None

    def find(self, text: str) -> tuple[str, int, int] | None:
        if self.unless is not None and self.unless.search(text):
            return None
        if self.pattern is not None:
            m = self.pattern.search(text)
            return None if m is None else (m.group(), m.start(), m.end())
        for span in find_entities(text):
            if span.kind in self.entity_kinds and _is_pii(span):
                return span.text, span.start, span.end
        return None


def _is_pii(span: EntitySpan) -> bool:
    if span.kind != "identifier":
        return True
    return span.value.startswith("*") or sum(ch.isdigit() for ch in span.value) >= 5


@dataclass(frozen=True, slots=True)
class Guard:
    name: str
    description: str
    rules: tuple[GuardRule, ...]

    def check(self, text: object) -> GuardMatch | None:
        """The first rule (in order) that fires on ``text``, or None.
        Raises ``InvalidTextError`` for bad input."""
        return self._check_prepared(prepare(text))

    def _check_prepared(self, text: str) -> GuardMatch | None:
        for rule in self.rules:
            found = rule.find(text)
            if found is not None:
                return GuardMatch(self.name, rule.name, *found)
        return None


def regex_rule(name: str, pattern: str, unless: re.Pattern[str] | None = None) -> GuardRule:
    return GuardRule(name, re.compile(pattern, NOCASE), unless=unless)
