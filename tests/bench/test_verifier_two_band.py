"""bench/verifier_two_band.py: which cut each band applies, and the choice on cal."""

from __future__ import annotations

import numpy as np

from bench.verifier_two_band import FACTORS, Split, choose

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
        ]
    )
    assert split.served(0.95, 0.90, 0.5).tolist() == [True, False, True, False]
    assert split.served(0.95, 0.90, 1.0).tolist() == [True, True, True, False]
    # T_low = T is today's rule: one band
    assert split.served(0.95, 0.95, 0.5).tolist() == [True, False, False, False]


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
