"""bench/contrast_cost.py counts, per intent, the pairs the contrast sets refuse."""

from __future__ import annotations

from bench.contrast_cost import measure


def test_counts_refused_pairs_within_each_intent_only() -> None:
    questions = [
        ("refund", "How does a buyer get a refund?"),
        ("refund", "How does a seller get a refund?"),
        ("refund", "How do I get a refund?"),  # names no member: refuses nothing
        ("other", "What can a seller list?"),  # another intent: never paired
    ]
    r = measure(questions)
    assert r["same_intent_pairs"] == 3 and r["refused"] == 1
    assert r["examples"] == [["refund", questions[0][1], questions[1][1]]]
