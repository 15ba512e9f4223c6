"""The translation script's choices and checks (bench/translate_questions.py); the
model itself is not run here (a 1.1 GB GGUF)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.semantic_pairs import Question
from bench.translate_questions import clean, pick, reclean

QUESTIONS = [
    Question(f"question {i} of {intent}", intent, source)
    for source, intent in (("banking77", "a"), ("banking77", "b"), ("clinc150", "c"))
    for i in range(5)
] + [Question("x" * 200, "a", "banking77")]


@pytest.mark.parametrize("by_intent", [False, True])
def test_pick_is_deterministic_and_a_larger_k_only_adds(by_intent: bool) -> None:
    two = pick(QUESTIONS, 2, 90, by_intent)
    three = pick(QUESTIONS, 3, 90, by_intent)
    assert pick(QUESTIONS, 2, 90, by_intent) == two
    assert len(two) == 6 and len(three) == 9
    assert set(two) < set(three)
    assert all(len(q.text) <= 90 for q in three)


def test_round_robin_covers_every_intent_first_and_by_intent_keeps_them_whole() -> None:
    rr = pick(QUESTIONS, 3, 90)
    assert {q.intent for q in rr[:3]} == {"a", "b", "c"}
    whole = pick(QUESTIONS, 3, 90, by_intent=True)
    assert [len({q.intent for q in whole[i : i + 3]}) for i in (0, 3, 6)] == [1, 1, 1]


@pytest.mark.parametrize(
    ("english", "answer", "want", "why"),
    [
        (
            "Can I send $50 to Spain?",
            "“我可以汇50美元到西班牙吗？”\n解释: ...",
            "我可以汇50美元到西班牙吗？",
            "",
        ),
        (
            "Do all ATMs take this card?",
            "所有的ATM都接受这张卡吗？",
            "所有的ATM都接受这张卡吗？",
            "",
        ),
        (
            "what is on my calendar for april 1",
            "我4月1日的日程是什么？",
            "我4月1日的日程是什么？",
            "",
        ),
        ("Can I send $50 to Spain?", "我可以汇500美元到西班牙吗？", None, "numbers_changed"),
        ("Can I send $50 to Spain?", "Sure! You can send money.", None, "no_han"),
        ("What is my balance?", "我的 account 余额是多少？", None, "english_left"),
        ("can the atm nicked my card", "ATM 被我卡 nick 了吗？", None, "english_left"),
        ("hi", "你好" * 30, None, "too_long"),
    ],
)
def test_clean(english: str, answer: str, want: str | None, why: str) -> None:
    assert clean(english, answer) == (want, why)


def test_reclean_moves_what_the_checks_now_accept(tmp_path: Path) -> None:
    out, rejected = tmp_path / "zh.jsonl", tmp_path / "zh.rejected.jsonl"
    row = {"source": "banking77", "intent": "atm_support"}
    rows = [
        {**row, "en": "Do ATMs take it?", "answer": "ATM接受吗？", "reason": "old_rule"},
        {**row, "en": "Can I?", "answer": "Yes.", "reason": "no_han"},
    ]
    rejected.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    assert reclean(out, rejected) == 1
    assert [json.loads(x)["zh"] for x in out.read_text().splitlines()] == ["ATM接受吗？"]
    assert [json.loads(x)["en"] for x in rejected.read_text().splitlines()] == ["Can I?"]
    assert reclean(out, rejected) == 0
