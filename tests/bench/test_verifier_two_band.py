"""bench/verifier_two_band.py: which cut each band applies, and the choice on cal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import bench.semantic_eval_verifier as sev
from bench.verifier_pairs import VPair
from bench.verifier_two_band import FACTORS, Split, choose, t_lows

Row = tuple[str, float, dict[float, bool]]
#: passes at every cut
ANY: dict[float, bool] = {}


def _split(rows: list[Row]) -> Split:
    """Pairs as (kind, cosine, passes at each factor given; True at every other)."""
    kinds = np.asarray([k for k, _, _ in rows])
    cos = np.asarray([c for _, c, _ in rows])
    passes = {f: np.asarray([p.get(f, True) for _, _, p in rows]) for f in FACTORS}
    return Split(cos, kinds, passes)


def test_each_band_applies_its_own_cut() -> None:
    strict_only = {1.0: True, 0.5: False}
    split = _split(
        [
            ("zh/paraphrase+", 0.96, strict_only),  # upper band: the target's cut
            ("zh/paraphrase+", 0.92, strict_only),  # lower band: refused at 0.5 x
            ("zh/paraphrase+", 0.92, ANY),  # lower band, passes the stricter cut
            ("zh/paraphrase+", 0.80, ANY),  # below T_low: never
            ("zh/paraphrase+", 0.95, strict_only),  # at T: the upper band's cut
            ("zh/paraphrase+", 0.90, strict_only),  # at T_low: in the lower band
        ]
    )
    assert split.served(0.95, 0.90, 0.5).tolist() == [True, False, True, False, True, False]
    assert split.served(0.95, 0.90, 1.0).tolist() == [True, True, True, False, True, True]
    # T_low = T is today's rule: one band
    assert split.served(0.95, 0.95, 0.5).tolist() == [True, False, False, False, True, False]


def test_the_grid_reaches_t_whatever_its_value() -> None:
    assert t_lows(0.95) == (0.85, 0.86, 0.87, 0.88, 0.89, 0.9, 0.91, 0.92, 0.93, 0.94, 0.95)
    assert t_lows(0.905)[-2:] == (0.9, 0.905)
    assert t_lows(0.85) == (0.85,)


def test_the_choice_opens_the_lower_band_only_as_far_as_the_goals_allow() -> None:
    # 400 written-Chinese hard negatives (the rule of three bounds 1% from 300): three
    # score above the plain cut at cosine 0.91, only the 1 x cut lets them through
    plain_only = {f: f == 1.0 for f in FACTORS}
    hard: list[Row] = [("zhw/hard", 0.30, ANY)] * 397 + [("zhw/hard", 0.91, plain_only)] * 3
    positives: list[Row] = [("zhw/paraphrase+", 0.96, ANY)] * 10 + [
        ("zhw/paraphrase+", 0.88, ANY)
    ] * 10
    positives += [("zh/paraphrase+", 0.96, ANY)] * 10
    split = _split(hard + positives)
    # 0.88 reaches every positive; any cut stricter than 1 x keeps the hard negatives
    # out, and of those ties the strictest is chosen
    assert choose(split, 0.95) == (0.88, 0.1)
    # control: when the stricter cuts pass the negatives too, no lower band is safe
    for f in FACTORS:
        split.passes[f][397:400] = True
    assert choose(split, 0.95) == (0.95, 1.0)
    # with them out of reach, the lower band opens again (ties: the higher T_low)
    split.cos[397:400] = 0.30
    assert choose(split, 0.95) == (0.88, 0.1)
    # and a positive only the plain cut passes makes 1 x the best
    split.passes[0.7][-11] = split.passes[0.5][-11] = False
    for f in (0.3, 0.2, 0.1):
        split.passes[f][-11] = False
    assert choose(split, 0.95) == (0.88, 1.0)


def test_a_narrower_band_beats_a_stricter_cut_on_a_tie() -> None:
    # Every positive sits at 0.94: (0.94, any factor) and (0.90, any factor) serve them
    # all. The higher T_low wins before the smaller factor.
    split = _split([("zhw/paraphrase+", 0.94, ANY)] * 5 + [("zh/paraphrase+", 0.96, ANY)] * 5)
    assert choose(split, 0.95) == (0.94, 0.1)


def test_a_language_without_positives_does_not_stop_the_choice() -> None:
    # No written-Chinese pairs at all: the translated ones alone decide.
    split = _split([("zh/paraphrase+", 0.96, ANY)] * 5 + [("zh/paraphrase+", 0.91, ANY)] * 5)
    assert "zhw/positives+" not in split.rates(split.served(0.95, 0.91, 1.0))
    assert choose(split, 0.95) == (0.91, 0.1)


class _Vectors:
    """An embedder of fixed unit vectors in 2-d, by text; ``coverage`` 0 for "uncovered"."""

    embedder_id, dim = "stub:2", 2

    def __init__(self, angles: dict[str, float]) -> None:
        self.angles = angles

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        a = np.asarray([self.angles[t] for t in texts])
        return np.stack([np.cos(a), np.sin(a)], axis=1).astype(np.float32)

    def coverage(self, text: str) -> float:
        return 0.0 if text.startswith("uncovered") else 1.0


def test_split_of_joins_coverage_the_validator_the_cut_and_the_identity_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def pair(a: str, b: str) -> VPair:
        return VPair(a, b, 1, "paraphrase", "zh", "eval", "clinc150")

    pairs = [
        pair("reset my password", "change my password"),  # between the two cuts
        pair("Q Same?", "q same"),  # equal once normalized: scores 0, passes every cut
        pair("uncovered a", "change my password"),  # scores 1 but one side is not covered
        pair("move 5 dollars", "move 50 dollars"),  # scores 1 but the validator refuses
    ]
    scores = {"reset my password": 0.985, "Q Same?": 0.0, "uncovered a": 1.0, "move 5 dollars": 1.0}

    def fake_scores(verifier: Any, ps: Sequence[VPair]) -> np.ndarray:
        return np.asarray([scores[p.a] for p in ps])

    monkeypatch.setattr(sev, "verifier_scores", fake_scores)
    angles = {t: 0.0 for p in pairs for t in (p.a, p.b)}
    no_model: Any = None  # verifier_scores, the one reader of the model, is replaced
    split = Split.of(pairs, _Vectors(angles), verifier=no_model, cuts={1.0: 0.98, 0.5: 0.99})
    assert split.cos.round(6).tolist() == [1.0] * 4
    assert split.passes[1.0].tolist() == [True, True, False, False]
    assert split.passes[0.5].tolist() == [False, True, False, False]
