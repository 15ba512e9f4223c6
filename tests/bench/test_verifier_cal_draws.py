"""bench/verifier_cal_draws.py: random draws of a capped sample spread the 1% cut; taking
every pair, or thinning, gives one cut."""

from __future__ import annotations

import numpy as np

from bench.verifier_cal_draws import cuts
from bench.verifier_calibrate import _cut


def test_draws_spread_the_cut_and_every_pair_does_not() -> None:
    rng = np.random.default_rng(5)
    negatives = {
        "hard": rng.beta(0.6, 3.0, 3000).tolist(),
        "polarity": rng.beta(0.3, 6.0, 800).tolist(),
        "entity": rng.beta(0.2, 8.0, 120).tolist(),
    }
    capped = cuts(negatives, 300, draws=20, target=0.01)
    assert capped["negatives"] == 300 + 300 + 120
    assert capped["drawn_sd"] > 0 and capped["drawn_min"] < capped["drawn_max"]
    # the same cap, thinned: one number, inside the draws' range
    assert capped["drawn_min"] <= capped["thinned"] <= capped["drawn_max"]
    whole = cuts(negatives, 10**9, draws=5, target=0.01)
    assert whole["cap"] == "all" and whole["drawn_sd"] == 0.0
    every = np.concatenate([np.asarray(v) for v in negatives.values()])
    assert whole["thinned"] == round(_cut(every, 0.01), 4)
