"""Languages (``validators.languages``): a language asked for on one side, or another
language, refuses; the same language in any case or script matches."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities

DIFFERENT = [
    ("Why is the sky blue?", "Why is the sky blue? Answer in Japanese."),
    ("How do I reset my password?", "Answer in German.\nHow do I reset my password?"),
    ("Tell me a fact about Paris.", "Tell me a fact about Paris in Italian."),
    ("How do you say thank you in french", "How do you say thank you in german"),
    ("Translate to French: Good morning", "Translate to Spanish: Good morning"),
    ("怎么说谢谢", "用日语怎么说谢谢"),
]

SAME = [
    ("Why is the sky blue? Answer in Japanese.", "why is the sky blue? answer in japanese"),
    ("What is the Japanese word for cat?", "How do you say cat in Japanese?"),
    ("Do you speak English?", "Can you speak english?"),
    ("用日语回答：天为什么是蓝的", "天为什么是蓝的？用日文回答"),
    # nationalities are no languages (nor names at a sentence start)
    ("Chinese food near me", "food near me"),
    ("斯劳高中是一所女子精英文法学校", "斯劳中学是一所女子精英学校"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_a_language_on_one_side_or_another_language_refuses(a: str, b: str) -> None:
    assert mismatch(a, b) == "language", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_language_matches(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


def test_language_values() -> None:
    assert extract_entities("Answer in Japanese")["language"] == {"ja"}
    assert extract_entities("请用普通话回答")["language"] == {"zh"}
    # a currency first: "Japanese yen" is JPY, no language
    assert "language" not in extract_entities("Convert to Japanese yen")
