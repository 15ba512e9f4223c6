"""bench/entity_change_cost.py finds the decisions that differ between two versions of
the entity rules, each run in its own process, and counts them per intent."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.entity_change_cost import ROOT, changed_decisions, intent_cost

QUESTIONS = [
    ("weather", "what is the weather in london"),
    ("weather", "what is the weather in paris"),
    ("weather", "what is the weather like"),  # no place: one-sided, never refused
    ("other", "can i get a card in london"),  # another intent: never paired
]


def _base_without_cities(tmp_path: Path) -> Path:
    """A checkout whose rules know no cities: what the rules were before session 39."""
    base = tmp_path / "base"
    shutil.copytree(ROOT / "validators", base / "validators",
                    ignore=shutil.ignore_patterns("verifier_model", "__pycache__"))  # fmt: skip
    names = base / "validators" / "place_names.py"
    text = names.read_text(encoding="utf-8")
    names.write_text(text + "\nCITIES.clear()\nEN_NAMES[:] = [n for n in EN_NAMES if n not in "
                     "('london', 'paris')]\n", encoding="utf-8")  # fmt: skip
    return base


def test_counts_only_the_decisions_that_changed(tmp_path: Path) -> None:
    r = intent_cost(_base_without_cities(tmp_path), QUESTIONS)
    assert r["pairs"] == 3  # the three weather questions, pairwise
    assert r["positives_newly_refused"] == 1 and r["positives_newly_served"] == 0
    assert r["refused_examples"] == [[QUESTIONS[0][1], QUESTIONS[1][1]]]
    assert r["newly_refused_by_intent"] == {"weather": 1}


def test_the_same_rules_change_nothing() -> None:
    texts = [t for _, t in QUESTIONS]
    touched, differ = changed_decisions(ROOT, texts, [(0, 1), (0, 2), (1, 3)])
    assert (touched, differ) == (0, [])
