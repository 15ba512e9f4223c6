"""bench/verifier_ensemble.py: each combination is cut at its own calibration 1%."""

from __future__ import annotations

import numpy as np
import pytest

from bench.verifier_ensemble import combination, cut_at, logit


def test_cut_at_lets_through_the_target_share_of_negatives() -> None:
    negatives = np.arange(1000, dtype=float)  # 0 .. 999
    cut = cut_at(negatives, 0.01)
    assert (negatives > cut).sum() == 10  # 1%: the ten highest
    assert cut_at(negatives[:50], 0.01) == 49.0  # fewer than 100: none may pass
    assert cut_at(np.asarray([]), 0.01) == float("-inf")


def test_logit_is_finite_at_the_ends() -> None:
    z = logit([0.0, 0.5, 1.0])
    assert np.isfinite(z).all() and z[1] == pytest.approx(0.0) and z[0] < -15 < 15 < z[2]


def test_the_weight_moves_the_decision_to_the_other_model() -> None:
    rng = np.random.default_rng(0)
    labels = np.asarray([0] * 500 + [1] * 500)
    # The English scores separate calibration pairs; the e5 scores are noise.
    cal_en = np.where(labels == 1, 3.0, -3.0) + rng.normal(0, 1, 1000)
    cal_e5 = rng.normal(0, 1, 1000)
    ev_en = np.where(labels == 1, 3.0, -3.0) + rng.normal(0, 1, 1000)
    ev_e5 = rng.normal(0, 1, 1000)
    kinds = np.asarray(["hard"] * 500 + ["paraphrase+"] * 500)
    cal, ev = (cal_en, cal_e5, labels), (ev_en, ev_e5, labels)
    english = combination(0.0, cal, ev, kinds)
    e5_only = combination(1.0, cal, ev, kinds)
    assert english["auc_eval"] > 0.99 and e5_only["auc_eval"] < 0.6
    assert english["positives_kept"] > 0.5 > e5_only["positives_kept"]
    assert english["served_by_kind"]["hard"] == english["negatives_served"] < 0.03
    assert english["served_by_kind"]["paraphrase+"] == english["positives_kept"]
