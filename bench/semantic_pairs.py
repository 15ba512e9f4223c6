"""Labelled question pairs for the semantic-cache evaluation (bench/semantic_eval.py).

Everything here is deterministic for a seed and needs no embedder: the builders
that pick nearest neighbours take the vectors as an argument (the evaluation
passes real all-MiniLM-L6-v2 vectors, the tests pass cheap fake ones).

Pair kinds (``Pair.kind``), each pair read as "``query`` arrives, ``cached`` is
the stored question whose answer would be served":

``positive``        same intent, same answer: for an anchor question, its most
                    similar question of the *same* intent (what a cache lookup
                    would meet first) whose **value tokens** agree (see
                    :func:`value_tokens`) and whose normalized text differs.
                    Same-intent pairs are not all paraphrases with the same
                    answer ("send $20" vs "send $500"): the value-token rule
                    keeps only pairs whose numbers, amounts, currencies, dates,
                    weekdays, months, relative days and am/pm agree (or that
                    have none). The rule is deliberately independent of the
                    ``validators`` package, so the validator's refusals on
                    positives are measured, not assumed away; negation is not
                    part of the rule ("card not working" and "card is broken"
                    have the same answer).
``positive_random`` same rule, but a random same-intent partner instead of the
                    nearest: a lower bound (many same-intent pairs are related
                    questions rather than paraphrases); reported, not a goal.
``hard``            neighbouring intents: for an anchor, its most similar question
                    of a *different* intent of the same dataset (BANKING77's
                    near-duplicate categories such as card_arrival vs
                    card_delivery_estimate come out this way). Texts are
                    deduplicated per dataset first (a text labelled with two
                    intents keeps its first label), so no pair is one text twice.
``entity``          a real question containing a value (number, amount, time,
                    date, ordinal day, year, weekday, month, relative day, long
                    identifier) paired with a copy in which exactly one value is
                    replaced by a different one (:func:`substitute_value`). The
                    two must not share an answer.
``context``         MeanCache follow-ups ("What are its types?") asked without
                    their main question. ``subkind`` says what they are paired
                    with: ``own_main`` (the conversation's main question),
                    ``other_main`` (the most similar main question of another
                    conversation) or ``other_followup`` (the most similar
                    follow-up of a conversation with a different main question;
                    textually identical follow-ups are excluded and counted:
                    asked bare they are the same question, and asked inside
                    their conversations only the partition key, which includes
                    the earlier turns, keeps them apart).
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: ../shared/data next to the repository, or $CACHEGATE_DATA (as in tests/validators).
DATA_DIR = Path(
    os.environ.get("CACHEGATE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)

POSITIVE = "positive"
POSITIVE_RANDOM = "positive_random"
HARD = "hard"
ENTITY = "entity"
CONTEXT = "context"
KINDS = (POSITIVE, POSITIVE_RANDOM, HARD, ENTITY, CONTEXT)
NEGATIVE_KINDS = (HARD, ENTITY, CONTEXT)


@dataclass(frozen=True)
class Question:
    text: str
    intent: str
    source: str  # "banking77" or "clinc150"


@dataclass(frozen=True)
class Conversation:
    main: str
    answer: str
    followup: str


@dataclass(frozen=True)
class Pair:
    kind: str
    query: str
    cached: str
    same_answer: bool
    subkind: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subkind": self.subkind,
            "query": self.query,
            "cached": self.cached,
            "same_answer": self.same_answer,
            **self.meta,
        }


# -- loading -----------------------------------------------------------------------


def normalized(text: str) -> str:
    """Case, whitespace and trailing punctuation folded: what makes two texts one entry."""
    return re.sub(r"[\s?!.]+$", "", re.sub(r"\s+", " ", text.casefold()).strip())


def _dedupe(questions: Iterable[Question]) -> list[Question]:
    """First occurrence of each normalized text per source (label-noise copies dropped)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for q in questions:
        key = (q.source, normalized(q.text))
        if q.text.strip() and key not in seen:
            seen.add(key)
            out.append(q)
    return out


def load_banking77(data_dir: Path = DATA_DIR) -> list[Question]:
    out = []
    for split in ("train", "test"):
        with (data_dir / "banking77" / f"{split}.csv").open(newline="", encoding="utf-8") as fh:
            out += [
                Question(r["text"].strip(), r["category"], "banking77") for r in csv.DictReader(fh)
            ]
    return _dedupe(out)


def load_clinc150(data_dir: Path = DATA_DIR) -> list[Question]:
    """In-scope questions only (the ``oos`` splits have no intent to compare)."""
    data = json.loads((data_dir / "clinc150" / "data_full.json").read_text(encoding="utf-8"))
    out = [
        Question(text.strip(), intent, "clinc150")
        for split in ("train", "val", "test")
        for text, intent in data[split]
    ]
    return _dedupe(out)


def load_conversations(data_dir: Path = DATA_DIR) -> list[Conversation]:
    """Every distinct (main question, follow-up) of the MeanCache contextual files."""
    seen: set[tuple[str, str]] = set()
    out = []
    for path in sorted((data_dir / "meancache_contextual").glob("*.json")):
        for item in json.loads(path.read_text(encoding="utf-8")):
            main = str(item["Main Query"]).strip()
            followup = str(item["Follow-Up Query"]).strip()
            key = (normalized(main), normalized(followup))
            if main and followup and key not in seen:
                seen.add(key)
                out.append(Conversation(main, str(item.get("Main Query Response", "")), followup))
    return out


def sample_per_intent(questions: Sequence[Question], per_intent: int, seed: int) -> list[Question]:
    """Up to ``per_intent`` questions of every intent, chosen with ``seed``."""
    rng = random.Random(seed)
    by_intent: dict[tuple[str, str], list[Question]] = defaultdict(list)
    for q in questions:
        by_intent[(q.source, q.intent)].append(q)
    out = []
    for key in sorted(by_intent):
        group = by_intent[key]
        out += rng.sample(group, min(per_intent, len(group)))
    return out


# -- value tokens (the positive rule, independent of validators/) ---------------------

_NUMBER_WORDS = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
    "million": 1000000, "dozen": 12, "half": 0.5, "twice": 2, "double": 2, "triple": 3,
}  # fmt: skip
# "one" is left out on purpose: it is mostly a pronoun ("get a new one").
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# "may" is left out: it is mostly the verb.
_MONTHS = ("january", "february", "march", "april", "june", "july", "august", "september",
           "october", "november", "december")  # fmt: skip
_MONTH_ABBR = {"jan": "january", "feb": "february", "apr": "april", "jun": "june",
               "jul": "july", "aug": "august", "sep": "september", "sept": "september",
               "oct": "october", "nov": "november", "dec": "december"}  # fmt: skip
_RELATIVE = {
    "today": "rel:0", "tonight": "rel:0", "tomorrow": "rel:+1", "yesterday": "rel:-1",
    "next week": "week:+1", "last week": "week:-1", "this week": "week:0",
    "next month": "month:+1", "last month": "month:-1", "this month": "month:0",
}  # fmt: skip
_CURRENCIES = {"$": "usd", "usd": "usd", "dollar": "usd", "dollars": "usd", "buck": "usd",
               "bucks": "usd", "£": "gbp", "gbp": "gbp", "pound": "gbp", "pounds": "gbp",
               "€": "eur", "eur": "eur", "euro": "eur", "euros": "eur"}  # fmt: skip

_W = r"(?<![A-Za-z])"
_E = r"(?![A-Za-z])"
_TOKEN_RE = re.compile(
    r"(?P<num>\d[\d,]*(?:\.\d+)?)"
    rf"|{_W}(?P<word>{'|'.join(_NUMBER_WORDS)}){_E}"
    rf"|{_W}(?P<dow>{'|'.join(_WEEKDAYS)})s?{_E}"
    rf"|{_W}(?P<month>{'|'.join(_MONTHS)}|{'|'.join(_MONTH_ABBR)}){_E}"
    rf"|{_W}(?P<rel>{'|'.join(sorted(_RELATIVE, key=len, reverse=True))}){_E}"
    rf"|(?P<cur>[$£€])|{_W}(?P<curw>{'|'.join(k for k in _CURRENCIES if k.isalpha())}){_E}",
    re.IGNORECASE,
)
_AMPM_RE = re.compile(r"\d\s?([ap])\.?m\.?(?![A-Za-z])", re.IGNORECASE)


def _canonical_number(raw: str) -> str:
    try:
        value = Decimal(raw.replace(",", ""))
    except InvalidOperation:
        return raw
    return format(value.normalize(), "f")


def value_tokens(text: str) -> frozenset[str]:
    """The values a question's answer may depend on, in a canonical form:
    numbers (digits and number words, so "two" == "2"), currencies, weekdays,
    months, relative days/weeks/months and am/pm. Positives must agree on them."""
    out: set[str] = set()
    for m in _TOKEN_RE.finditer(text):
        if m["num"]:
            out.add("n:" + _canonical_number(m["num"].rstrip(",")))
        elif m["word"]:
            out.add("n:" + _canonical_number(str(_NUMBER_WORDS[m["word"].lower()])))
        elif m["dow"]:
            out.add("dow:" + m["dow"].lower())
        elif m["month"]:
            word = m["month"].lower()
            out.add("month:" + _MONTH_ABBR.get(word, word))
        elif m["rel"]:
            out.add(_RELATIVE[re.sub(r"\s+", " ", m["rel"].lower())])
        else:
            out.add("cur:" + _CURRENCIES[(m["cur"] or m["curw"]).lower()])
    out.update("ampm:" + m[1].lower() for m in _AMPM_RE.finditer(text))
    return frozenset(out)


# -- value substitution (entity negatives) ------------------------------------------------


@dataclass(frozen=True)
class Substitution:
    kind: str
    old: str
    new: str
    start: int
    end: int


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _other(rng: random.Random, choices: Sequence[Any], old: Any) -> Any:
    return rng.choice([c for c in choices if c != old])


def _new_number(raw: str, rng: random.Random) -> str:
    """A different, plausible number written like ``raw`` (commas, decimals kept)."""
    clean = raw.replace(",", "")
    whole, _, frac = clean.partition(".")
    value = int(whole) if whole else 0
    if value <= 12:
        new = _other(rng, range(1, 13), value)
    else:
        new = value
        while new == value:
            new = max(1, round(value * rng.choice((0.5, 1.5, 2, 3, 5))))
    text = f"{new:,}" if "," in raw else str(new)
    return f"{text}.{frac}" if frac else text


def _sub_time(m: re.Match[str], rng: random.Random) -> str:
    raw = m["hour"] or m["hour2"]
    new = _other(rng, range(1, 13), int(raw))
    return f"{new}{m.group(0)[len(raw) :]}"


def _sub_ordinal(m: re.Match[str], rng: random.Random) -> str:
    return _ordinal(_other(rng, range(1, 29), int(m["day"])))


def _sub_slash_date(m: re.Match[str], rng: random.Random) -> str:
    day = _other(rng, range(1, 29), int(m["b"]))
    return f"{m['a']}/{day}{m['c'] or ''}"


def _sub_year(m: re.Match[str], rng: random.Random) -> str:
    return str(int(m.group(0)) + rng.choice((-3, -2, -1, 1, 2, 3)))


def _sub_amount(m: re.Match[str], rng: random.Random) -> str:
    raw = m["v1"] or m["v2"]
    start = (m.start("v1") if m["v1"] else m.start("v2")) - m.start()
    whole = m.group(0)
    return whole[:start] + _new_number(raw, rng) + whole[start + len(raw) :]


def _sub_identifier(m: re.Match[str], rng: random.Random) -> str:
    digits = m.group(0)
    tail = digits[-2:]
    new_tail = tail
    while new_tail == tail:
        new_tail = f"{rng.randrange(100):02d}"
    return digits[:-2] + new_tail


def _sub_number(m: re.Match[str], rng: random.Random) -> str:
    return _new_number(m.group(0), rng)


def _keep_case(old: str, new: str) -> str:
    if old.isupper() and len(old) > 1:
        return new.upper()
    return new.capitalize() if old[:1].isupper() else new


_SUB_WORDS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
              "eleven", "twelve", "fifteen", "twenty", "thirty", "forty", "fifty")  # fmt: skip


def _sub_word(choices: Sequence[str]) -> Callable[[re.Match[str], random.Random], str]:
    def sub(m: re.Match[str], rng: random.Random) -> str:
        old = m.group(0)
        return _keep_case(old, _other(rng, choices, old.lower()))

    return sub


_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"

_Sub = Callable[[re.Match[str], random.Random], str]
_SUBSTITUTIONS: tuple[tuple[str, re.Pattern[str], _Sub], ...] = (
    ("time", re.compile(r"(?<![\d:.])(?P<hour>\d{1,2})(?::[0-5]\d)?\s?(?:[ap]\.?m\.?)(?![A-Za-z])"
                        r"|(?<![\d:.])(?P<hour2>\d{1,2}):[0-5]\d(?![\d:])", re.I), _sub_time),
    ("slash_date", re.compile(r"(?<![\d/])(?P<a>\d{1,2})/(?P<b>\d{1,2})(?P<c>/\d{2,4})?(?![\d/])"),
     _sub_slash_date),
    ("ordinal_day", re.compile(r"(?<![\d.,])(?P<day>[1-9]|[12]\d|3[01])(?:st|nd|rd|th)(?![A-Za-z])",
                               re.I), _sub_ordinal),
    ("amount", re.compile(rf"[$£€]\s?(?P<v1>{_NUM})(?![\d,]|\.\d)"
                          rf"|(?<![\w.,-])(?P<v2>{_NUM})\s?(?:dollars?|bucks|pounds?"
                          r"|euros?|usd|gbp|eur|[$£€])(?![A-Za-z])", re.I), _sub_amount),
    ("year", re.compile(r"(?<![\w.,-])(?:19[5-9]\d|20[0-3]\d)(?![\w/:-]|[.,]\d)"), _sub_year),
    ("identifier", re.compile(r"(?<![\w.,-])\d{5,}(?![\w/:-]|[.,]\d)"), _sub_identifier),
    ("number", re.compile(rf"(?<![\w.,/:-])(?:{_NUM})(?![\w/:-]|[.,]\d)"), _sub_number),
    ("number_word", re.compile(rf"{_W}(?:{'|'.join(_SUB_WORDS)}){_E}", re.I),
     _sub_word(_SUB_WORDS)),
    ("weekday", re.compile(rf"{_W}(?:{'|'.join(_WEEKDAYS)}){_E}", re.I), _sub_word(_WEEKDAYS)),
    ("month", re.compile(rf"{_W}(?:{'|'.join(_MONTHS)}){_E}", re.I), _sub_word(_MONTHS)),
    ("relative_day", re.compile(rf"{_W}(?:today|tomorrow|yesterday){_E}", re.I),
     _sub_word(("today", "tomorrow", "yesterday"))),
    ("relative_week", re.compile(rf"{_W}(?:next|last|this) week{_E}", re.I),
     _sub_word(("next week", "last week", "this week"))),
)  # fmt: skip


def value_spans(text: str) -> list[tuple[str, int, int, re.Match[str]]]:
    """Substitutable values in ``text``, most specific kind first, non-overlapping."""
    taken: list[tuple[int, int]] = []
    spans = []
    for kind, pattern, _ in _SUBSTITUTIONS:
        for m in pattern.finditer(text):
            start, end = m.span()
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            spans.append((kind, start, end, m))
    return sorted(spans, key=lambda s: s[1])


def substitute_value(text: str, rng: random.Random, tries: int = 8) -> Substitution | None:
    """Replace one value of ``text`` (chosen with ``rng``) by a different one of the
    same kind, so that :func:`value_tokens` differ. ``None`` when there is none."""
    spans = value_spans(text)
    if not spans:
        return None
    rng.shuffle(spans)
    before = value_tokens(text)
    subs = {kind: sub for kind, _, sub in _SUBSTITUTIONS}
    for kind, start, end, m in spans:
        for _ in range(tries):
            new = subs[kind](m, rng)
            candidate = text[:start] + new + text[end:]
            if new != m.group(0) and value_tokens(candidate) != before:
                return Substitution(kind, m.group(0), new, start, end)
    return None


def apply(text: str, sub: Substitution) -> str:
    return text[: sub.start] + sub.new + text[sub.end :]


# -- pair builders -------------------------------------------------------------------------


def _unit(vectors: NDArray[np.floating[Any]]) -> NDArray[np.float32]:
    v = np.asarray(vectors, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _best(sims: NDArray[np.float32], allowed: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Per row, the column with the highest similarity among ``allowed`` (-1 if none)."""
    masked = np.where(allowed, sims, -np.inf)
    best = masked.argmax(axis=1)
    best[~np.isfinite(masked[np.arange(len(best)), best])] = -1
    return best


def _take(pairs: list[Pair], n: int, rng: random.Random) -> list[Pair]:
    if len(pairs) > n:
        pairs = rng.sample(pairs, n)
    return pairs


def _same_source_blocks(pool: Sequence[Question]) -> dict[str, NDArray[np.int64]]:
    by_source: dict[str, list[int]] = defaultdict(list)
    for i, q in enumerate(pool):
        by_source[q.source].append(i)
    return {s: np.asarray(ix, dtype=np.int64) for s, ix in sorted(by_source.items())}


def intent_pairs(
    pool: Sequence[Question],
    vectors: NDArray[np.floating[Any]],
    *,
    n_positive: int,
    n_hard: int,
    seed: int,
    block: int = 1024,
) -> dict[str, list[Pair]]:
    """``positive`` (nearest same-intent, value tokens agree), ``positive_random``
    (random same-intent, value tokens agree) and ``hard`` (nearest other-intent of
    the same dataset) pairs from ``pool`` and its ``vectors`` (one row per question).
    Each unordered pair appears once; the direction (which side is cached) is random."""
    if len(pool) != len(vectors):
        raise ValueError("one vector per pool question")
    rng = random.Random(seed)
    unit = _unit(vectors)
    norms = [normalized(q.text) for q in pool]
    tokens = [value_tokens(q.text) for q in pool]
    found: dict[str, list[Pair]] = {POSITIVE: [], POSITIVE_RANDOM: [], HARD: []}
    seen: dict[str, set[frozenset[str]]] = {k: set() for k in found}

    def add(kind: str, i: int, j: int) -> None:
        key = frozenset((norms[i], norms[j]))
        if key in seen[kind]:
            return
        seen[kind].add(key)
        qi, ci = (i, j) if rng.random() < 0.5 else (j, i)
        meta = {
            "query_intent": pool[qi].intent,
            "cached_intent": pool[ci].intent,
            "source": pool[qi].source,
        }
        found[kind].append(Pair(kind, pool[qi].text, pool[ci].text, kind != HARD, meta=meta))

    def ids(values: Sequence[Any]) -> NDArray[np.int64]:
        table: dict[Any, int] = {}
        return np.asarray([table.setdefault(v, len(table)) for v in values], dtype=np.int64)

    for _source, idx in _same_source_blocks(pool).items():
        intents = ids([pool[i].intent for i in idx])
        toks = ids([tokens[i] for i in idx])
        texts = ids([norms[i] for i in idx])
        for lo in range(0, len(idx), block):
            rows = idx[lo : lo + block]
            sims = unit[rows] @ unit[idx].T
            different_text = texts[lo : lo + block, None] != texts[None, :]
            same_intent = intents[lo : lo + block, None] == intents[None, :]
            positive_ok = same_intent & different_text & (toks[lo : lo + block, None] == toks)
            hard_ok = ~same_intent & different_text
            best_pos = _best(sims, positive_ok)
            best_hard = _best(sims, hard_ok)
            for r, i in enumerate(rows):
                if best_pos[r] >= 0:
                    add(POSITIVE, int(i), int(idx[best_pos[r]]))
                    options = np.flatnonzero(positive_ok[r])
                    add(POSITIVE_RANDOM, int(i), int(idx[options[rng.randrange(len(options))]]))
                if best_hard[r] >= 0:
                    add(HARD, int(i), int(idx[best_hard[r]]))
    return {
        POSITIVE: _take(found[POSITIVE], n_positive, rng),
        POSITIVE_RANDOM: _take(found[POSITIVE_RANDOM], n_positive, rng),
        HARD: _take(found[HARD], n_hard, rng),
    }


def _water_fill(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Split ``n`` as evenly as possible over groups of the given sizes."""
    quota = dict.fromkeys(sizes, 0)
    left = n
    open_groups = sorted(sizes, key=lambda k: (sizes[k], k))
    while left > 0 and open_groups:
        share = max(1, left // len(open_groups))
        for k in list(open_groups):
            take = min(share, sizes[k] - quota[k], left)
            quota[k] += take
            left -= take
            if quota[k] >= sizes[k]:
                open_groups.remove(k)
            if left == 0:
                break
    return quota


def entity_pairs(questions: Sequence[Question], n: int, seed: int) -> list[Pair]:
    """Up to ``n`` (original, one value substituted) pairs from the questions that
    carry a value, spread as evenly as the data allows over substitution kinds (a
    plain sample would be dominated by "today"); the substituted copy is the query
    or the cached side at random."""
    rng = random.Random(seed)
    by_kind: dict[str, list[tuple[Question, Substitution]]] = defaultdict(list)
    for q in questions:
        sub = substitute_value(q.text, rng)
        if sub is not None and normalized(apply(q.text, sub)) != normalized(q.text):
            by_kind[sub.kind].append((q, sub))
    quota = _water_fill({k: len(v) for k, v in by_kind.items()}, n)
    chosen = [item for k in sorted(by_kind) for item in rng.sample(by_kind[k], quota[k])]
    rng.shuffle(chosen)
    out: list[Pair] = []
    for q, sub in chosen:
        changed = apply(q.text, sub)
        query, cached = (changed, q.text) if rng.random() < 0.5 else (q.text, changed)
        meta = {
            "query_intent": q.intent,
            "cached_intent": q.intent,
            "source": q.source,
            "substituted": "query" if query == changed else "cached",
            "old": sub.old,
            "new": sub.new,
        }
        out.append(Pair(ENTITY, query, cached, False, subkind=sub.kind, meta=meta))
    return out


def context_pairs(
    conversations: Sequence[Conversation],
    main_vectors: NDArray[np.floating[Any]],
    followup_vectors: NDArray[np.floating[Any]],
    n: int,
    seed: int,
) -> tuple[list[Pair], dict[str, int]]:
    """Follow-ups asked without their main question, paired with their own main
    question, the nearest other main question and the nearest follow-up of a
    conversation with a different main question. Returns the pairs (at most ``n``,
    subkinds balanced) and counts of what was excluded."""
    if not (len(conversations) == len(main_vectors) == len(followup_vectors)):
        raise ValueError("one main and one follow-up vector per conversation")
    rng = random.Random(seed)
    mains = _unit(main_vectors)
    follows = _unit(followup_vectors)
    main_norm = np.asarray([normalized(c.main) for c in conversations], dtype=object)
    follow_norm = np.asarray([normalized(c.followup) for c in conversations], dtype=object)
    other_conv = main_norm[:, None] != main_norm[None, :]
    identical = other_conv & (follow_norm[:, None] == follow_norm[None, :])
    best_main = _best(follows @ mains.T, other_conv & (follow_norm[:, None] != main_norm[None, :]))
    best_follow = _best(follows @ follows.T, other_conv & ~identical)
    by_sub: dict[str, list[Pair]] = {"own_main": [], "other_main": [], "other_followup": []}
    seen: set[tuple[str, str, str]] = set()
    for i, conv in enumerate(conversations):
        partners = {"own_main": conv.main}
        if best_main[i] >= 0:
            partners["other_main"] = conversations[best_main[i]].main
        if best_follow[i] >= 0:
            partners["other_followup"] = conversations[best_follow[i]].followup
        for sub, cached in partners.items():
            key = (sub, normalized(conv.followup), normalized(cached))
            if key[1] == key[2] or key in seen:
                continue
            seen.add(key)
            meta = {"main_question": conv.main}
            by_sub[sub].append(Pair(CONTEXT, conv.followup, cached, False, subkind=sub, meta=meta))
    per_sub = max(1, n // len(by_sub))
    out: list[Pair] = []
    for sub in by_sub:
        out += _take(by_sub[sub], per_sub, rng)
    excluded = {"identical_followup_pairs": int(identical.sum()) // 2}
    return out, excluded
