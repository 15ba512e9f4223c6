"""bench/shadow_scale.py: shares of same- and different-meaning pairs at each floor."""

from __future__ import annotations

import numpy as np

from bench.shadow_scale import shares


def test_shares_count_each_pair_once_by_whether_its_intents_match() -> None:
    # four unit vectors: a and a' close (cos 0.96), b and c far from both and each other
    angle = np.arccos(0.96)
    vectors = np.asarray(
        [[1.0, 0.0, 0.0], [np.cos(angle), np.sin(angle), 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]]
    )
    out = shares(vectors, ["x", "x", "y", "z"], [0.80, 0.97])
    assert out["same_pairs"] == 1 and out["different_pairs"] == 5
    assert out["0.8000"] == {"same_at_or_above": 1.0, "different_at_or_above": 0.0}
    assert out["0.9700"]["same_at_or_above"] == 0.0
    # one different-meaning pair brought close counts as 1 of 5
    vectors[2] = vectors[0]
    assert shares(vectors, ["x", "x", "y", "z"], [0.80])["0.8000"]["different_at_or_above"] == 0.4
