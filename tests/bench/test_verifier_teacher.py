"""bench/verifier_teacher.py: the Chinese intent pairs' soft targets mix the label with
the shipped English verifier's score of their English originals, only for the training
split's intent kinds."""

from __future__ import annotations

import pytest

from bench.verifier_pairs import VPair
from bench.verifier_pairs_zh import load_zh_questions
from bench.verifier_teacher import english_originals, english_teacher, soft_targets, taught


@pytest.fixture(scope="module")
def questions() -> dict[str, list[str]]:
    by_intent: dict[str, list[str]] = {}
    for q in load_zh_questions():
        by_intent.setdefault(f"{q.source}:{q.intent}", []).append(q.zh)
    return by_intent


def _pair(a: str, b: str, label: int, kind: str, split: str = "train") -> VPair:
    return VPair(a, b, label, kind, "zh", split, "banking77-zh")


def test_only_training_intent_pairs_with_originals_are_taught(
    questions: dict[str, list[str]],
) -> None:
    originals = english_originals(load_zh_questions())
    (a, b), (c, *_) = questions["banking77:card_arrival"][:2], questions["banking77:top_up_failed"]
    pairs = [
        _pair(a, b, 1, "paraphrase"),
        _pair(a, c, 0, "hard"),
        _pair(a, b, 1, "paraphrase", split="eval"),  # never the held-out splits
        _pair(a, b, 1, "surface"),  # a rewrite: its original would be one question
        _pair(a, "不在译文里的句子", 1, "paraphrase"),  # no English original
    ]
    assert taught(pairs, originals) == pairs[:2]


def test_targets_mix_label_and_the_english_verifiers_score(
    questions: dict[str, list[str]],
) -> None:
    originals = english_originals(load_zh_questions())
    # "When will I get my new card?" / "I still haven't gotten my new card. When will it get here?"
    a, b = questions["banking77:card_arrival"][0], questions["banking77:card_arrival"][2]
    c = questions["banking77:top_up_failed"][0]
    pairs = [_pair(a, b, 1, "paraphrase"), _pair(a, c, 0, "hard")]
    teacher = english_teacher()
    en = teacher([(originals[a], originals[b]), (originals[a], originals[c])])
    targets = soft_targets(pairs, teacher, 0.5, originals)
    assert targets[(a, b)] == pytest.approx(0.5 + 0.5 * en[0])
    assert targets[(a, c)] == pytest.approx(0.5 * en[1])
    # the teacher ranks the same-intent pair above the other intent's question
    assert en[0] > en[1]
    assert soft_targets(pairs, teacher, 0.0, originals) == {}
    with pytest.raises(ValueError, match="teacher weight"):
        soft_targets(pairs, teacher, 1.5, originals)
