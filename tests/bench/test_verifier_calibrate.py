"""bench/verifier_calibrate.py's map of Chinese scores onto the English scale: at every
calibrated target the Chinese cut lands on the English one, so the shared cut (the
higher of the two) is the English cut, whatever the sizes of the two negative sets;
the map is monotone and keeps 0 and 1."""

from __future__ import annotations

import numpy as np
import pytest

from bench.verifier_calibrate import TARGETS, _cut, common_scale


@pytest.mark.parametrize(("n_zh", "n_en", "seed"), [(1209, 2178, 0), (300, 2000, 1), (97, 50, 2)])
def test_the_chinese_cut_lands_on_the_english_one_at_every_target(
    n_zh: int, n_en: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    zh = rng.beta(0.5, 3.0, n_zh)  # another shape than the English scores, as in life
    en = rng.beta(0.4, 4.0, n_en)
    knots = common_scale(zh.tolist(), en.tolist())
    mapped = np.interp(zh, knots["x"], knots["y"])
    for t in TARGETS:
        shared = max(_cut(en, t), _cut(mapped, t))
        assert shared == pytest.approx(_cut(en, t), abs=1e-6), t
        # and the Chinese side keeps its bound at that cut
        assert (mapped > shared).sum() <= np.floor(t * n_zh), t
    assert np.all(np.diff(knots["x"]) > 0) and np.all(np.diff(knots["y"]) >= 0)
    assert knots["x"][0] == knots["y"][0] == 0.0 and knots["y"][-1] == 1.0


def test_interpolated_quantiles_would_have_raised_the_cut() -> None:
    """The control: the map the repo used until session 28 (np.quantile knots) lets the
    Chinese 1% cut land above the English one on the same scores."""
    rng = np.random.default_rng(0)
    zh, en = rng.beta(0.5, 3.0, 1209), rng.beta(0.4, 4.0, 2178)
    probs = np.unique(np.concatenate([np.linspace(0, 0.99, 100), np.linspace(0.99, 1.0, 21)]))
    x = np.maximum.accumulate(np.concatenate([[0.0], np.quantile(zh, probs), [1.0]]))
    y = np.maximum.accumulate(np.concatenate([[0.0], np.quantile(en, probs), [1.0]]))
    mapped = np.interp(zh, x + 1e-9 * np.arange(len(x)), y)
    raised = [t for t in TARGETS if _cut(mapped, t) > _cut(en, t) + 1e-6]
    assert raised  # what the order-statistic knots fix
