"""bench/verifier_cal_sample.py: the calibration keeps each large group's pairs at evenly
spaced ranks of their scores, so the cut is a function of the pairs and the weights,
not of a random draw; the control shows a draw of the same size is not."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from bench.verifier_cal_sample import calibration_pool, calibration_sample, select, thin
from bench.verifier_calibrate import _cut, score_pairs
from bench.verifier_pairs import VPair
from validators.verifier import MODEL_DIR, PairVerifier


def _share_above(scores: np.ndarray, x: float) -> float:
    return float((scores > x).mean())


def test_small_groups_are_kept_whole_and_cap_is_checked() -> None:
    assert thin([0.3, 0.1, 0.2], 3) == [0, 1, 2]
    assert thin([], 5) == []
    with pytest.raises(ValueError):
        thin([0.1, 0.2], 0)


def test_thinning_keeps_evenly_spaced_ranks_in_index_order() -> None:
    scores = [0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6, 0.0]  # ranks 9,1,5,3,7,2,8,4,6,0
    kept = thin(scores, 5)
    # cap 5 of 10: the midpoints of five shares of two are ranks 1, 3, 5, 7, 9
    assert sorted(scores[i] for i in kept) == [0.1, 0.3, 0.5, 0.7, 0.9]
    assert kept == sorted(kept)


@pytest.mark.parametrize("seed", range(5))
def test_every_share_above_a_score_is_the_whole_groups_within_half_a_pair(seed: int) -> None:
    rng = np.random.default_rng(seed)
    full = rng.beta(0.4, 4.0, 5370)
    cap = 500
    kept = full[thin(full.tolist(), cap)]
    assert len(kept) == cap
    for x in np.quantile(full, np.linspace(0.0, 1.0, 201)):
        assert abs(_share_above(kept, x) - _share_above(full, x)) <= 0.5 / cap + 1e-12


def test_the_choice_does_not_depend_on_the_order_of_the_pairs() -> None:
    rng = random.Random(3)
    scores = [rng.random() for _ in range(1000)]
    shuffled = scores[:]
    rng.shuffle(shuffled)
    a = sorted(scores[i] for i in thin(scores, 100))
    b = sorted(shuffled[i] for i in thin(shuffled, 100))
    assert a == b


def test_control_a_random_draw_moves_the_one_percent_cut() -> None:
    # What thinning replaced: random draws of 500 of the same 5,370 scores give 1% cuts
    # far apart, while the thinned sample's cut sits next to the whole group's.
    rng = np.random.default_rng(0)
    full = rng.beta(0.4, 4.0, 5370)
    whole = _cut(full, 0.01)
    draws = [_cut(rng.choice(full, 500, replace=False), 0.01) for _ in range(20)]
    thinned = _cut(full[thin(full.tolist(), 500)], 0.01)
    spread = max(draws) - min(draws)
    assert abs(thinned - whole) < spread / 4
    assert max(abs(d - whole) for d in draws) > 2 * abs(thinned - whole)


def _pair(i: int, kind: str, label: int, lang: str = "en", split: str = "cal") -> VPair:
    return VPair(f"question {i} a", f"question {i} b", label, kind, lang, split, "test")


def test_select_thins_each_group_and_keeps_pool_order() -> None:
    hard = [_pair(i, "hard", 0) for i in range(10)]
    para = [_pair(100 + i, "paraphrase", 1) for i in range(3)]
    zh = [_pair(200 + i, "hard", 0, lang="zh") for i in range(4)]
    pool = [*hard[:5], *para, *hard[5:], *zh]
    scores = [float(i) for i in range(len(pool))]
    chosen = select(pool, scores, cap=4)
    # hard (en) has 10 > 4: thinned to 4; the other groups fit and are kept whole
    assert sum(p in hard for p in chosen) == 4
    assert [p for p in chosen if p not in hard] == [*para, *zh]
    assert chosen == [p for p in pool if p in chosen]
    with pytest.raises(ValueError):
        select(pool, scores[:-1])


def test_the_pool_is_the_calibration_split_without_unrelated_pairs() -> None:
    pairs = [
        _pair(1, "hard", 0),
        _pair(2, "unrelated", 0),
        _pair(3, "paraphrase", 1, split="eval"),
        _pair(4, "paraphrase", 1, split="train"),
        _pair(5, "paraphrase", 1),
    ]
    assert calibration_pool(pairs) == [pairs[0], pairs[4]]


def test_the_real_verifier_scores_choose_the_sample() -> None:
    texts = [
        ("How do I reset my password?", "How can I change my password?"),
        ("How do I reset my password?", "What is my account balance?"),
        ("Where is my card?", "My card has not arrived yet"),
        ("Can I get a refund?", "How do I return an item for a refund?"),
        ("What time do you open?", "How do I close my account?"),
    ]
    pool = [VPair(a, b, 1, "paraphrase", "en", "cal", "test") for a, b in texts]
    empty: dict[str, Any] = {"negatives": {}, "positives": {}}
    scores = [v.score for v in score_pairs(PairVerifier(MODEL_DIR, calibration=empty), pool)]
    ranked = sorted(range(5), key=lambda i: scores[i])
    chosen = calibration_sample(pool, MODEL_DIR, cap=2)
    # cap 2 of 5: the midpoints of two shares are ranks 1 and 3 (0 the lowest)
    assert chosen == [pool[i] for i in sorted([ranked[1], ranked[3]])]
