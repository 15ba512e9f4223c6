"""bench/verifier_judge_teacher.py and the English trainer's soft targets: the judge's
cached scores mix with the labels, and a target the trainer is given is what it trains
towards (the same targets as the labels train exactly as the labels do)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bench.train_verifier import load_start
from bench.verifier_judge_teacher import judge_targets, load_cache, platt
from bench.verifier_pairs import VPair
from bench.verifier_training import TrainConfig, train


def pair(a: str, b: str, label: int) -> VPair:
    return VPair(a=a, b=b, label=label, kind="hard", lang="en", split="train", source="t")


PAIRS = [
    pair("How do I reset my PIN?", "how can I change my PIN number", 1),
    pair("my card has not arrived", "when will my new card be delivered", 1),
    pair("How do I top up my account?", "why did my top up fail?", 0),
    pair("How do I freeze my card?", "how do I order a new card", 0),
]


def write_cache(path: Path, scores: dict[int, float]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i, p in scores.items():
            f.write(json.dumps({"a": PAIRS[i].a, "b": PAIRS[i].b, "p": p}) + "\n")


def test_targets_mix_label_and_calibrated_judge_for_the_scored_pairs_only(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "judge.jsonl"
    write_cache(cache, {0: 0.9, 1: 0.6, 2: 0.7})  # pair 3 was never judged
    mapped = platt([0.9, 0.6, 0.7], [1, 1, 0])
    targets = judge_targets(PAIRS, cache, 0.5)
    assert set(targets) == {(p.a, p.b) for p in PAIRS[:3]}
    for i in range(3):
        want = 0.5 * PAIRS[i].label + 0.5 * mapped[i]
        assert targets[(PAIRS[i].a, PAIRS[i].b)] == pytest.approx(want)
    assert judge_targets(PAIRS, cache, 0.0) == {}
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="teacher weight"):
            judge_targets(PAIRS, cache, bad)
    with pytest.raises(ValueError, match="no judge scores"):
        judge_targets(PAIRS, tmp_path / "missing.jsonl", 0.5)
    assert load_cache(tmp_path / "missing.jsonl") == {}
    # The cache's orientation is the pair's: a pair judged the other way round is not it.
    flipped = tmp_path / "flipped.jsonl"
    flipped.write_text(json.dumps({"a": PAIRS[3].b, "b": PAIRS[3].a, "p": 0.9}) + "\n")
    with pytest.raises(ValueError, match="no judge scores"):
        judge_targets(PAIRS, flipped, 0.5)
    # One text pair with two labels cannot have one target.
    twice = [*PAIRS, pair(PAIRS[0].a, PAIRS[0].b, 0)]
    with pytest.raises(ValueError, match="share their texts"):
        judge_targets(twice, cache, 0.5)


def test_platt_keeps_the_order_and_pulls_a_yes_leaning_judge_to_the_labels() -> None:
    negatives, positives = [0.5, 0.6, 0.85, 0.55], [0.55, 0.8, 0.9, 0.95]
    mapped = platt(negatives + positives, [0] * 4 + [1] * 4)
    assert (
        np.argsort(mapped, kind="stable").tolist()
        == np.argsort(negatives + positives, kind="stable").tolist()
    )
    # Raw, the negatives average 0.625 "yes"; mapped, they sit below one half.
    assert np.mean(mapped[:4]) < 0.5 < np.mean(mapped[4:])
    assert np.mean(mapped[:4]) < np.mean(negatives)
    with pytest.raises(ValueError, match="positive and negative"):
        platt([0.2, 0.4], [1, 1])


def trained(targets: dict[tuple[str, str], float] | None) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)  # the fresh head's initialisation
    model, tokenizer, _ = load_start(None)
    cfg = TrainConfig(batch_size=4, epochs=2, lr=1e-3, seed=3, max_minutes=5)
    threads = torch.get_num_threads()
    try:
        train(model, tokenizer, PAIRS, cfg, targets)
    finally:
        torch.set_num_threads(threads)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_the_trainer_trains_towards_the_targets_it_is_given() -> None:
    labels = trained(None)
    as_labels = trained({(p.a, p.b): float(p.label) for p in PAIRS})
    soft = trained({(p.a, p.b): 0.5 for p in PAIRS})
    # Control: targets equal to the labels train as the labels do (to the last bits
    # that the embeddings' multithreaded backward sums in varying order).
    for name, tensor in labels.items():
        torch.testing.assert_close(tensor, as_labels[name], rtol=0, atol=1e-6, msg=name)
    # Other targets train other weights, by far more than that.
    head = "classifier.weight"
    assert (labels[head] - soft[head]).abs().max() > 1e-3
