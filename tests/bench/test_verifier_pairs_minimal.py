"""bench/verifier_pairs_minimal.py: one word swapped, the label it means, and no text of
a calibration or evaluation pair among the training pairs (no model, no data set read
but BANKING77 and CLINC150's training intents)."""

from __future__ import annotations

import random

import pytest

import bench.verifier_pairs_minimal as minimal
from bench.verifier_pairs import VPair, normalized
from bench.verifier_pairs_minimal import (
    SIBLING_SETS,
    SOURCE,
    VERB_SETS,
    minimal_pairs,
    swaps,
    training_pairs,
    training_questions,
)


def test_a_sibling_swap_changes_one_word_and_keeps_the_case() -> None:
    rng = random.Random(1)
    (changed,) = swaps("Can a buyer cancel the order?", [("buyer", "seller")], rng)
    assert changed == "Can a seller cancel the order?"
    (first,) = swaps("Buyer fees: who pays them?", [("buyer", "seller")], rng)
    assert first.startswith("Seller ")
    # both members in one question ("from checking to savings"): no pair is made
    assert swaps("Move money from checking to savings", [("checking", "savings")], rng) == []


def test_a_verb_synonym_swaps_only_before_a_determiner() -> None:
    rng = random.Random(2)
    verbs = [s for s in VERB_SETS if "change" in s]
    assert verbs, "change is one of the synonym verbs"
    made = swaps("How do I change my PIN?", verbs, rng, guard=True)
    assert made and all(m != "How do I change my PIN?" and m.endswith(" my PIN?") for m in made)
    assert swaps("Why did the rate change yesterday?", verbs, rng, guard=True) == []


def test_training_pairs_hold_no_text_of_the_held_out_splits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    questions = training_questions([])[:3000]
    monkeypatch.setattr(minimal, "training_questions", lambda shared: questions)
    pairs = minimal_pairs(questions, seed=3)
    assert pairs and {p.label for p in pairs} == {0, 1} and {p.source for p in pairs} == {SOURCE}
    assert all(p.split == "train" for p in pairs)
    assert all(len(set(p.a.split()) ^ set(p.b.split())) <= 4 for p in pairs)  # one swap
    held_text = pairs[0].a
    held = [VPair(held_text, "anything", 1, "paraphrase", "en", "eval", "test")]
    chosen = training_pairs(held, 10**6, seed=3)  # every pair: only the filter drops any
    assert 0 < len(chosen) < len(pairs)
    assert normalized(held_text) not in {normalized(t) for p in chosen for t in (p.a, p.b)}
    kinds = {p.kind for p in chosen}
    assert kinds == {"minimal_sibling", "minimal_synonym"}
    assert any(s for s in SIBLING_SETS if len(s) > 1)
