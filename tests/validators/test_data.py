"""Measured on real questions (BANKING77 and CLINC150 test splits).

(a) a question with a number or amount, and the same question with a different
    value, must be refused (≥ 99%; measured 100%);
(b) a question against itself, through a JSON round trip of its stored
    entities, must always agree (100%);
(c) same-intent pairs that agree (informational floor: most same-intent pairs
    are not exact paraphrases, so this is a regression guard, not a goal);
(d) guard recall on the CLINC150 intents each guard is meant for, and how often
    it fires elsewhere.
Figures are printed (``pytest -s``) for the report.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict

import pytest

from validators import GUARDS, Entities, compare_entities, extract_entities
from validators.entities import _analyse_cached

_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]
_WORD_RE = re.compile(r"(?<![A-Za-z])(" + "|".join(_WORDS) + r")(?![A-Za-z])", re.IGNORECASE)


def _bump(digits: str) -> str:
    value = int(digits)
    new = value + 1 if set(digits) != {"9"} else value - 1
    return str(new).zfill(len(digits))


def substitutions(question: str) -> list[str]:
    """Variants of ``question`` with one value changed: every digit run in turn,
    every small number word in turn, and a currency symbol swapped."""
    out = []
    for m in re.finditer(r"\d+", question):
        out.append(question[: m.start()] + _bump(m.group()) + question[m.end() :])
    for m in _WORD_RE.finditer(question):
        word = m.group().lower()
        new = _WORDS[(_WORDS.index(word) + 1) % len(_WORDS)]
        out.append(question[: m.start()] + new + question[m.end() :])
    for sym, other in (("$", "€"), ("€", "$"), ("£", "$")):
        if sym in question:
            out.append(question.replace(sym, other, 1))
    return out


@pytest.fixture(scope="module")
def questions(banking77: list[tuple[str, str]], clinc150: dict) -> list[tuple[str, str]]:
    return banking77 + [(t, "clinc:" + i) for t, i in clinc150["test"]]


@pytest.fixture(scope="module")
def extracted(questions: list[tuple[str, str]]) -> dict[str, Entities]:
    return {q: extract_entities(q) for q, _ in questions}


def test_a_changed_value_is_refused(
    questions: list[tuple[str, str]], extracted: dict[str, Entities]
) -> None:
    pairs = refused = 0
    missed: list[tuple[str, str]] = []
    with_values = 0
    for question, _ in questions:
        variants = substitutions(question)
        if not variants:
            continue
        with_values += 1
        original = extracted[question]
        for variant in variants:
            pairs += 1
            if compare_entities(original, extract_entities(variant)).matches:
                missed.append((question, variant))
            else:
                refused += 1
    rate = refused / pairs
    print(f"\n(a) value substitutions: {refused}/{pairs} refused = {rate:.4f} "
          f"over {with_values} questions with a value")  # fmt: skip
    assert with_values > 500 and pairs > 800
    assert rate >= 0.99, missed[:20]


def test_a_question_always_matches_itself(
    questions: list[tuple[str, str]], extracted: dict[str, Entities]
) -> None:
    for question, _ in questions:
        # the stored side goes through JSON, as it does through the semantic store
        stored = Entities.from_dict(json.loads(json.dumps(extracted[question].to_dict())))
        comparison = compare_entities(extracted[question], stored)
        assert comparison.matches, (question, comparison.to_dict())
    print(f"\n(b) identical questions: {len(questions)}/{len(questions)} match")


def test_extraction_does_not_depend_on_the_cache(extracted: dict[str, Entities]) -> None:
    sample = list(extracted)[::10]
    _analyse_cached.cache_clear()
    assert all(extract_entities(q) == extracted[q] for q in sample)


def test_same_intent_pairs_mostly_agree(
    questions: list[tuple[str, str]], extracted: dict[str, Entities]
) -> None:
    by_intent: dict[str, list[str]] = defaultdict(list)
    for question, intent in questions:
        by_intent[intent].append(question)
    rnd = random.Random(4)
    agree = total = 0
    reasons: Counter[str] = Counter()
    for intent in sorted(by_intent):
        texts = by_intent[intent]
        for _ in range(30):
            a, b = rnd.sample(texts, 2)
            kind = compare_entities(extracted[a], extracted[b]).mismatch_kind
            total += 1
            if kind is None:
                agree += 1
            else:
                reasons[kind] += 1
    rate = agree / total
    print(f"\n(c) same-intent pairs agreeing: {agree}/{total} = {rate:.3f}; "
          f"refusals by kind: {dict(reasons.most_common())}")  # fmt: skip
    assert rate >= 0.65


GUARD_INTENTS = {
    "time_sensitive": {"weather", "time", "date", "exchange_rate", "traffic"},
    "personalized": {"balance", "bill_balance", "transactions", "credit_score", "order_status",
                     "pto_balance", "rewards_balance", "spending_history", "credit_limit",
                     "bill_due", "payday", "pto_used", "min_payment"},
    "numeric_computation": {"calculator", "measurement_conversion"},
    "high_risk": {"vaccines"},
}  # fmt: skip
# Issue 12 narrowed two guards to what seed 003 means: personalized no longer fires on
# every "my card"/"my account" question (procedural ones pass; precision against the
# hand labels is measured in bench/guard_eval.py), and high_risk fires on advice about
# someone's situation ("do I need shots for Peru"), not on encyclopedic travel facts
# ("which countries require vaccinations"), so both recall floors here are lower.
GUARD_FLOORS = {"time_sensitive": 0.5, "personalized": 0.55, "numeric_computation": 0.85,
                "high_risk": 0.6}  # fmt: skip
# "others" includes CLINC's action intents (book, pay, set an alarm), which act on the
# asker's own data and which personalized refuses on purpose
GUARD_CEILINGS = {"time_sensitive": 0.03, "personalized": 0.2, "numeric_computation": 0.01,
                  "high_risk": 0.01}  # fmt: skip


def test_the_code_guard_fires_on_no_clinc_question(clinc150: dict) -> None:
    # CLINC150 has no programming intent: every firing would be a false refusal.
    assert set(GUARDS) == set(GUARD_INTENTS) | {"code_generation"}  # each guard measured
    guard = GUARDS["code_generation"]
    assert [t for t, _ in clinc150["test"] if guard.check(t) is not None] == []
    assert guard.check("write a python function that reverses a string")  # control


@pytest.mark.parametrize("name", list(GUARD_INTENTS))
def test_guard_recall_on_clinc_intents(name: str, clinc150: dict) -> None:
    rows = clinc150["test"]
    intents = GUARD_INTENTS[name]
    guard = GUARDS[name]
    target = [t for t, i in rows if i in intents]
    other = [t for t, i in rows if i not in intents]
    recall = sum(guard.check(t) is not None for t in target) / len(target)
    elsewhere = sum(guard.check(t) is not None for t in other) / len(other)
    print(f"\n(d) {name}: recall {recall:.3f} on {len(target)} target questions, "
          f"fires on {elsewhere:.3f} of {len(other)} others")  # fmt: skip
    assert recall >= GUARD_FLOORS[name]
    assert elsewhere <= GUARD_CEILINGS[name]
