"""Prefix anti-pattern findings on crafted prompt sets (seed 003, 关键反模式): a
timestamp / date / request id / random token at the start, few-shot examples
in shuffled order, user content before the shared part; clean templates as
negative controls. Word tokens give exact expected positions; the same sets
through SmolLM2's tokenizer must give the same findings."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from gateway.reports.antipatterns import Analyzer, HFTokenizer, WhitespaceTokenizer
from prefix.model.loader import LoadedModel

SYSTEM = (
    "You are the support assistant of Northwind Bank. Answer in one or two short sentences, "
    "politely and precisely. Never ask for passwords or full card numbers. Transfers between "
    "Northwind accounts are instant; transfers to other banks take one business day; "
    "international transfers in euros take up to three business days and cost 5 EUR. "
    "Card disputes must be raised within 60 days of the transaction date."
)
WORDS = len(SYSTEM.split())  # 64
QUESTIONS = [
    "How do I reset my password?",
    "What is the fee for international transfers?",
    "Can I dispute a card payment?",
    "Where is the nearest branch?",
    "Do you have a mobile app?",
    "Is there a limit on daily transfers?",
    "Which documents do I need to open an account?",
    "Why was my card declined?",
]
EXAMPLES = [
    f"Example {i}: Q: can I do thing number {i} with my account today?\n"
    f"A: yes, thing {i} is allowed for every customer of the bank."
    for i in range(5)
]
BLOCK = 4
Prompts = Callable[[], list[str]]
HEADER = "Answer like the examples."


def blocks(n: int) -> int:
    return n // BLOCK * BLOCK


def timestamped() -> list[str]:
    return [
        f"Current time: 2024-05-{d:02d}T10:{d:02d}:07Z\n{SYSTEM}\n{q}"
        for d, q in enumerate(QUESTIONS, start=1)
    ]


def dated() -> list[str]:
    return [f"Today is 2024-06-{d:02d}.\n{SYSTEM}\n{q}" for d, q in enumerate(QUESTIONS, 1)]


def request_ids() -> list[str]:
    rng = random.Random(7)
    return [f"Request {uuid.UUID(int=rng.getrandbits(128))}\n{SYSTEM}\n{q}" for q in QUESTIONS]


def random_tokens() -> list[str]:
    rng = random.Random(3)
    alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
    return [
        f"nonce={''.join(rng.choice(alphabet[:20]) for _ in range(6))}{rng.randint(10, 99)}"
        f"\n{SYSTEM}\n{q}"
        for q in QUESTIONS
    ]


def shuffled_few_shot() -> list[str]:
    rng = random.Random(1)
    out = []
    for q in QUESTIONS:
        examples = EXAMPLES[:]
        rng.shuffle(examples)
        out.append(HEADER + "\n\n" + "\n\n".join(examples) + f"\n\nQ: {q}")
    return out


def user_first() -> list[str]:
    return [f"{q}\n\n{SYSTEM}" for q in QUESTIONS]


def clean() -> list[str]:
    return [f"{SYSTEM}\n{q}" for q in QUESTIONS]


def clean_few_shot() -> list[str]:
    return [HEADER + "\n\n" + "\n\n".join(EXAMPLES) + f"\n\nQ: {q}" for q in QUESTIONS]


def analyse(prompts: list[str]) -> list[dict[str, Any]]:
    return Analyzer(WhitespaceTokenizer(), block_size=BLOCK).analyse(prompts)


@pytest.mark.parametrize(
    ("prompts", "subtype", "first_diff"),
    [
        (timestamped, "timestamp", 2),  # "Current", "time:" then the timestamp
        (dated, "date", 2),  # "Today", "is" then the date
        (request_ids, "request_id", 1),
        (random_tokens, "random_token", 0),
    ],
)
def test_volatile_value_at_the_start(prompts: Prompts, subtype: str, first_diff: int) -> None:
    [finding] = analyse(prompts())
    assert finding["kind"] == "volatile_prefix"
    assert finding["subtypes"] == {subtype: len(QUESTIONS) - 1}
    assert finding["pairs"] == finding["pairs_checked"] == len(QUESTIONS) - 1
    assert finding["first_diff_token"] == first_diff
    assert finding["reused_tokens_now"] == blocks(first_diff)
    # fixed: the value moved after the shared system prompt, whose 64 words become prefix
    assert finding["reusable_tokens_if_fixed"] == blocks(first_diff + WORDS)
    assert finding["gain_tokens_per_request"] == blocks(first_diff + WORDS) - blocks(first_diff)
    example = finding["examples"][0]
    assert example["first_diff_token"] == first_diff
    assert example["differs_a"] != example["differs_b"]
    assert "Northwind" in example["a"] and finding["advice"]


def test_shuffled_few_shot_examples() -> None:
    prompts = shuffled_few_shot()
    [finding] = analyse(prompts)
    assert finding["kind"] == "shuffled_few_shot"
    header = len(HEADER.split())
    per_example = len(EXAMPLES[0].split())
    # all pairs differ in order somewhere; the prefix now ends inside the examples
    assert finding["pairs"] == len(QUESTIONS) - 1
    assert finding["first_diff_token"] >= header
    # fixed (one order): header + all five examples + "Q:" are shared
    assert finding["reusable_tokens_if_fixed"] == blocks(header + 5 * per_example + 1)
    assert finding["gain_tokens_per_request"] >= blocks(3 * per_example)
    assert finding["examples"][0]["differs_a"].startswith("Example")


def test_user_content_before_the_shared_part() -> None:
    [finding] = analyse(user_first())
    assert finding["kind"] == "user_content_first"
    assert finding["first_diff_token"] == 0 and finding["reused_tokens_now"] == 0
    assert finding["reusable_tokens_if_fixed"] == blocks(WORDS)
    assert finding["gain_tokens_per_request"] == blocks(WORDS)


@pytest.mark.parametrize("prompts", [clean, clean_few_shot])
def test_clean_templates_have_no_finding(prompts: Prompts) -> None:
    assert analyse(prompts()) == []


def test_unrelated_identical_and_too_few_prompts_have_no_finding() -> None:
    assert analyse(QUESTIONS) == []
    assert analyse([SYSTEM] * 10) == []
    assert analyse(timestamped()[:2]) == []  # one pair is below min_pairs
    assert analyse([]) == []
    # one stray timestamped prompt among clean ones is below min_fraction
    mixed = clean() + clean() + clean()
    mixed[5] = timestamped()[0]
    assert analyse(mixed) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("prompts", "kind"),
    [
        (timestamped, "volatile_prefix"),
        (request_ids, "volatile_prefix"),
        (shuffled_few_shot, "shuffled_few_shot"),
        (user_first, "user_content_first"),
        (clean, None),
        (clean_few_shot, None),
    ],
)
def test_same_findings_with_the_engine_tokenizer(
    smol_loaded: LoadedModel, prompts: Prompts, kind: str | None
) -> None:
    tok = HFTokenizer(smol_loaded.tokenizer)
    findings = Analyzer(tok, block_size=16).analyse(prompts())
    assert [f["kind"] for f in findings] == ([kind] if kind else [])
    if kind is None:
        return
    f = findings[0]
    assert f["tokenizer"] == "engine"
    system_tokens = len(tok.encode(SYSTEM))
    least = 48 if kind == "shuffled_few_shot" else (system_tokens // 16 - 1) * 16
    assert f["gain_tokens_per_request"] >= least
    assert f["reusable_tokens_if_fixed"] % 16 == 0
    if kind == "volatile_prefix":
        expected = "timestamp" if prompts is timestamped else "request_id"
        assert set(f["subtypes"]) == {expected}


def test_a_deadline_bounds_the_pairs_read_newest_first() -> None:
    # A report's analysis is bounded in time (gateway/reports/api.py): past the
    # deadline no more pairs are read, and what was read are the newest.
    prompts = timestamped()
    analyzer = Analyzer(block_size=BLOCK)
    everything = analyzer.analyse(prompts, min_pairs=1, min_fraction=0.0)
    past = analyzer.analyse(prompts, min_pairs=1, min_fraction=0.0, deadline=0.0)
    assert everything and everything[0]["pairs_checked"] == len(prompts) - 1
    assert past and past[0]["pairs_checked"] == 1 and past[0]["pairs"] == 1
    newest = past[0]["examples"][0]
    assert "05-08" in newest["b"] and "05-08" not in everything[0]["examples"][0]["b"]
