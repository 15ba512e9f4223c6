"""Answer-shaping instructions (``validators.instructions``): an instruction on one
side refuses, the same instruction in other words matches, and words that only look
like one are none."""

from __future__ import annotations

import pytest

from tests.validators.conftest import mismatch
from validators import extract_entities

Q = "What is the capital of France?"
DIFFERENT = [
    (Q, Q + " Answer in all caps."),
    (Q, Q + " Give the answer in reverse."),
    (Q, Q + " Reply in JSON with a key 'capital'."),
    (Q, "Summarize: " + Q),
    ("Why is the sky blue?", "Why is the sky blue? Explain like I'm a physicist."),
    ("Explain photosynthesis.", "Explain photosynthesis to a five year old."),
    ("Explain gravity like I'm five", "Explain gravity like I'm a physicist"),
    ("How do I reset my password?", "How do I reset my password? Respond only with yes or no."),
    ("Fix the grammar: me and him goes to school", "Fix the spelling: me and him goes to school"),
    (Q, Q + " Answer in lowercase."),
    ("Explain inflation.", "Explain inflation briefly."),
]

SAME = [
    (Q + " Answer in all caps.", "what is the capital of france? answer in uppercase"),
    ("Explain gravity like I'm five", "ELI5 gravity"),
    ("Explain gravity like I'm five", "Explain gravity like I am 5"),
    # words that only look like instructions
    ("Please tell me i would like to change my PIN", "i would like to change my PIN"),
    ("What is Paris like in winter?", "What's Paris like in winter?"),
    ("how do i change my car oil", "give me step by step instructions for changing my oil"),
    ("Can I book a table for two?", "Can I reserve a table for two?"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_an_instruction_on_one_side_refuses(a: str, b: str) -> None:
    assert mismatch(a, b) == "instruction", (extract_entities(a), extract_entities(b))


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_or_no_instruction_matches(a: str, b: str) -> None:
    assert mismatch(a, b) is None, (extract_entities(a), extract_entities(b))


def test_instruction_values() -> None:
    assert extract_entities(Q + " Answer in all caps.")["instruction"] == {"case:upper"}
    assert extract_entities("Explain like I'm a physicist")["instruction"] == {"like:physicist"}
    assert extract_entities("Explain it to a 5-year-old")["instruction"] == {"like:5"}
    assert extract_entities("Write a haiku about cats")["instruction"] == {"format:haiku"}
    assert extract_entities("Fix the spelling: teh cat")["instruction"] == {"task:fix-spelling"}
    # "like I'm five" is a persona, not the number 5; a "not" before it still counts
    entities = extract_entities("Explain why it is not blue like I'm five")
    assert "number" not in entities and entities["polarity"] == {"negative"}
