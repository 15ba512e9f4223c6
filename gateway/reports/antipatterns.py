"""Prefix anti-pattern findings (seed 003, 关键反模式 / 提升命中率的手段) from a tenant's
recent prompts (system message + first user message,
:class:`gateway.reports.recorder.PromptBuffer`).

Prompts are tokenized with the engine's tokenizer when the engine runs in
process (token positions are then the engine's), else split on whitespace
(positions are words). Distinct consecutive prompts are compared in pairs:

- **shuffled_few_shot**: the two prompts share at least two example blocks
  (paragraphs separated by a blank line, else lines) in a different order.
  Gain: the common prefix once the second prompt's shared blocks are put in the
  first prompt's order, minus the common prefix now.
- **volatile_prefix**: after the first differing token a long shared run
  (≥ ``min_run`` tokens) follows a short differing region: at most
  ``max_gap_chars`` (64) characters on each side that look like a timestamp,
  date, time, request id (UUID, long hex, "request id") or random token
  (letters and digits mixed, ≥ 8 characters), checked on the region with a
  little context, or any value of at most ``max_tokens_other`` (4) tokens
  (subtype ``other``).
- **user_content_first**: the long shared run follows any other differing
  region: user content placed before the shared part (at the extreme, a long
  common suffix with a short common prefix).

For every pair: ``first_diff`` = index of the first differing token (= tokens
the two share from the start), ``reused_now`` = that rounded down to whole KV
blocks, ``reused_if_fixed`` = (first_diff + shared run) rounded down to blocks,
``gain`` = the difference: the tokens per request that fixing the prompt would
let the prefix cache reuse. A kind is reported when at least ``min_pairs`` pairs
and ``min_fraction`` of the compared pairs show it; the numbers are medians.
A clean template (shared system prompt first, the question last) yields nothing.
"""

from __future__ import annotations

import itertools
import re
import statistics
import time
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from difflib import Match, SequenceMatcher
from typing import Any, Protocol

MIN_RUN = 32
MAX_TOKENS = 2048  # longer prompts are compared on their first 2048 tokens
# The run searched for after the first difference lies within this many tokens of it:
# the matcher is quadratic, and over 2048 repetitive tokens a pair took 0.5 s (a
# review, session 44: a tenant's prompts could make each report view cost minutes).
MATCH_WINDOW = 1024
MAX_SEGMENTS = 256  # lines or paragraphs compared for a shuffled order
MAX_GAP_CHARS = 64
MAX_GAP_TOKENS_OTHER = 4


class Tokenizer(Protocol):
    name: str

    def encode(self, text: str) -> list[Hashable]: ...

    def decode(self, tokens: Sequence[Hashable]) -> str: ...


class WhitespaceTokenizer:
    name = "whitespace"

    def encode(self, text: str) -> list[Hashable]:
        return list(text.split())

    def decode(self, tokens: Sequence[Hashable]) -> str:
        return " ".join(str(t) for t in tokens)


class HFTokenizer:
    """A Hugging Face tokenizer (the engine's): token ids, no special tokens."""

    name = "engine"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[Hashable]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, tokens: Sequence[Hashable]) -> str:
        return str(self.tokenizer.decode(list(tokens)))


# Checked in order on the differing region with a little context around it.
_VOLATILE = (
    (
        "request_id",
        re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
    ),
    ("timestamp", re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}|\b1\d{9}(\d{3})?\b")),
    (
        "date",
        re.compile(
            r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b|\b\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}\b|"
            r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}\b|"
            r"\b\d{1,2} (jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)",
            re.I,
        ),
    ),
    ("timestamp", re.compile(r"\b\d{1,2}:\d{2}(:\d{2})?\b")),
    (
        "request_id",
        re.compile(
            r"\b(req(uest)?|trace|session|correlation)[ _-]?id\b|"
            r"\b[0-9a-f]{8,}\b",
            re.I,
        ),
    ),
    (
        "random_token",
        re.compile(r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{8,}\b"),
    ),
)

KINDS = {
    "volatile_prefix": (
        "Volatile value near the start of the prompt",
        "A timestamp, date, request id or random token sits before the shared part, so every "
        "request has a different prefix and the blocks after it are never reused. Move it to "
        "the end of the prompt (after the shared system prompt), or drop it.",
    ),
    "shuffled_few_shot": (
        "Few-shot examples in a different order",
        "The same example blocks arrive in a different order, so the prefix changes at the "
        "first example. Keep the examples in one fixed order.",
    ),
    "user_content_first": (
        "User content before the shared part",
        "Request-specific content comes before a long part that every request shares, so the "
        "shared part is never a prefix. Put the shared part first and the user content last.",
    ),
}


@dataclass(frozen=True)
class PairFinding:
    kind: str
    subtype: str | None
    first_diff: int
    run: int
    reused_now: int
    reused_if_fixed: int
    example: dict[str, str]

    @property
    def gain(self) -> int:
        return self.reused_if_fixed - self.reused_now


def common_prefix(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _segments(text: str) -> list[str]:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if len(paragraphs) >= 3:
        return paragraphs
    return [line.strip() for line in text.splitlines() if line.strip()]


class Analyzer:
    def __init__(
        self,
        tokenizer: Tokenizer | None = None,
        block_size: int = 16,
        min_run: int = MIN_RUN,
        max_gap_chars: int = MAX_GAP_CHARS,
        max_tokens_other: int = MAX_GAP_TOKENS_OTHER,
    ) -> None:
        self.tok: Tokenizer = tokenizer or WhitespaceTokenizer()
        self.block = max(1, block_size)
        self.min_run = min_run
        self.max_gap_chars = max_gap_chars
        self.max_tokens_other = max_tokens_other

    def _blocks(self, tokens: int) -> int:
        return tokens // self.block * self.block

    def pair(self, a: str, b: str) -> PairFinding | None:
        ta, tb = self.tok.encode(a)[:MAX_TOKENS], self.tok.encode(b)[:MAX_TOKENS]
        d = common_prefix(ta, tb)
        if d == len(ta) or d == len(tb):
            return None
        shuffled = self._shuffled(a, b, ta, d)
        if shuffled is not None:
            return shuffled
        window_a, window_b = ta[d : d + MATCH_WINDOW], tb[d : d + MATCH_WINDOW]
        matcher = SequenceMatcher(None, window_a, window_b, autojunk=False)
        runs = [Match(m.a + d, m.b + d, m.size) for m in matcher.get_matching_blocks() if m.size]
        long = [m for m in runs if m.size >= self.min_run]
        if not long:
            return None
        run = long[0]
        matched_a = sum(m.size for m in runs if m.a < run.a)
        matched_b = sum(m.size for m in runs if m.b < run.b)
        gap = max(run.a - d - matched_a, run.b - d - matched_b)
        before = self.tok.decode(ta[max(0, d - 12) : d])
        region = self.tok.decode(ta[max(0, d - 12) : run.a])
        context = self.tok.decode(ta[max(0, d - 12) : run.a + 4])
        example = {
            "a": self.tok.decode(ta[max(0, d - 12) : run.a + 12]),
            "b": self.tok.decode(tb[max(0, d - 12) : run.b + 12]),
            "differs_a": self.tok.decode(ta[d : run.a]),
            "differs_b": self.tok.decode(tb[d : run.b]),
        }
        volatile = _volatile_kind(context, len(before), max(len(region), len(before) + 1))
        subtype: str | None = volatile
        short = max(len(example["differs_a"]), len(example["differs_b"])) <= self.max_gap_chars
        if (short and volatile != "other") or gap <= self.max_tokens_other:
            kind = "volatile_prefix"
        else:
            kind, subtype = "user_content_first", None
        return PairFinding(
            kind, subtype, d, run.size, self._blocks(d), self._blocks(d + run.size), example
        )

    def _shuffled(self, a: str, b: str, ta: list[Hashable], d: int) -> PairFinding | None:
        sa, sb = _segments(a)[:MAX_SEGMENTS], _segments(b)[:MAX_SEGMENTS]
        count_a, count_b = Counter(sa), Counter(sb)  # list.count per segment: quadratic
        shared = {s for s, n in count_a.items() if n == 1 and count_b[s] == 1}
        if len(shared) < 2:
            return None
        order_a = [s for s in sa if s in shared]
        order_b = [s for s in sb if s in shared]
        if order_a == order_b:
            return None
        # The fix: one fixed order for every request (here: the first prompt's).
        fixed = common_prefix(ta, self.tok.encode(_reorder(b, order_b, order_a))[:MAX_TOKENS])
        if self._blocks(fixed) - self._blocks(d) < self.min_run // 2:
            return None
        k = next(i for i, (x, y) in enumerate(zip(order_a, order_b, strict=True)) if x != y)
        example = {
            "a": " | ".join(x[:40] for x in order_a),
            "b": " | ".join(x[:40] for x in order_b),
            "differs_a": order_a[k][:80],
            "differs_b": order_b[k][:80],
        }
        reused_now, reused_fixed = self._blocks(d), self._blocks(fixed)
        subtype = f"{len(shared)} shared blocks"
        return PairFinding(
            "shuffled_few_shot", subtype, d, fixed - d, reused_now, reused_fixed, example
        )

    def analyse(
        self,
        prompts: Sequence[str],
        max_pairs: int = 100,
        min_pairs: int = 2,
        min_fraction: float = 0.3,
        deadline: float | None = None,
    ) -> list[dict[str, Any]]:
        """Findings over consecutive distinct prompts (newest last), as JSON-ready dicts;
        past ``deadline`` (``time.monotonic()``) no more pairs are read (newest first)."""
        distinct = [p for i, p in enumerate(prompts) if i == 0 or p != prompts[i - 1]]
        pairs = list(itertools.pairwise(distinct))[-max_pairs:]
        found: dict[str, list[PairFinding]] = {}
        checked: list[tuple[str, str]] = []
        for a, b in reversed(pairs):
            if deadline is not None and checked and time.monotonic() > deadline:
                break
            checked.append((a, b))
            finding = self.pair(a, b)
            if finding is not None and finding.gain > 0:
                found.setdefault(finding.kind, []).append(finding)
        out = []
        pairs = checked
        for items in found.values():
            items.reverse()  # oldest first, as the prompts came
        for kind, items in found.items():
            if len(items) < min_pairs or len(items) < min_fraction * len(pairs):
                continue
            title, advice = KINDS[kind]
            subtypes = Counter(f.subtype for f in items if f.subtype)
            out.append(
                {
                    "kind": kind,
                    "title": title,
                    "advice": advice,
                    "pairs": len(items),
                    "pairs_checked": len(pairs),
                    "tokenizer": self.tok.name,
                    "subtypes": dict(subtypes.most_common()),
                    "first_diff_token": int(statistics.median(f.first_diff for f in items)),
                    "reused_tokens_now": int(statistics.median(f.reused_now for f in items)),
                    "reusable_tokens_if_fixed": int(
                        statistics.median(f.reused_if_fixed for f in items)
                    ),
                    "gain_tokens_per_request": int(statistics.median(f.gain for f in items)),
                    "examples": [f.example | {"first_diff_token": f.first_diff} for f in items[:3]],
                }
            )
        return sorted(out, key=lambda f: -f["gain_tokens_per_request"])


def _reorder(text: str, order: list[str], canon: list[str]) -> str:
    """``text`` with its shared segments (in ``order``) rewritten in ``canon`` order."""
    out, pos = [], 0
    for segment, replacement in zip(order, canon, strict=True):
        at = text.index(segment, pos)
        out.append(text[pos:at])
        out.append(replacement)
        pos = at + len(segment)
    out.append(text[pos:])
    return "".join(out)


def _volatile_kind(context: str, start: int, end: int) -> str:
    """The first volatile pattern with a match overlapping ``context[start:end]``."""
    for name, pattern in _VOLATILE:
        if any(m.start() < end and m.end() > start for m in pattern.finditer(context)):
            return name
    return "other"
