"""The Chinese head of the pair verifier (validators/verifier_zh.py): both of its forms
(logistic regression, one relu layer) compute what their weights say, survive a
round trip through ``zh_head.json`` and refuse weights of the wrong shape."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from validators.verifier_zh import FEATURES, ChineseHead, features

N = len(FEATURES)
RNG = np.random.default_rng(0)


def _v(size: int, low: float | None = None) -> list[float]:
    values = RNG.normal(size=size) if low is None else RNG.uniform(low, 2.0, size=size)
    return [float(x) for x in values]


def _m(rows: int, cols: int) -> list[list[float]]:
    return [_v(cols) for _ in range(rows)]


ROWS = _m(5, N)


def test_logistic_head_is_a_sigmoid_of_a_dot_product() -> None:
    mean, std, coef = _v(N), _v(N, low=0.5), _v(N)
    head = ChineseHead(mean, std, coef, 0.3)
    x = (np.asarray(ROWS) - mean) / np.asarray(std)
    want = [1 / (1 + math.exp(-(float(r @ np.asarray(coef)) + 0.3))) for r in x]
    assert head.score(ROWS) == pytest.approx(want, abs=1e-12)


def test_hidden_layer_head_is_relu_then_logistic() -> None:
    mean, std = _v(N), _v(N, low=0.5)
    w, b, coef = _m(N, 4), _v(4), _v(4)
    head = ChineseHead(mean, std, coef, -0.2, hidden_w=w, hidden_b=b)
    x = (np.asarray(ROWS) - mean) / np.asarray(std)
    hidden = np.maximum(x @ np.asarray(w) + np.asarray(b), 0.0)
    want = 1 / (1 + np.exp(-(hidden @ np.asarray(coef) - 0.2)))
    assert head.score(ROWS) == pytest.approx(want.tolist(), abs=1e-12)


@pytest.mark.parametrize("hidden", [0, 3])
def test_round_trip_through_json(tmp_path: Path, hidden: int) -> None:
    if hidden:
        head = ChineseHead(_v(N), [1.0] * N, _v(hidden), 0.1, _m(N, hidden), _v(hidden))
    else:
        head = ChineseHead(_v(N), [1.0] * N, _v(N), 0.1)
    path = tmp_path / "zh_head.json"
    path.write_text(json.dumps({**head.to_json(), "to_common_scale": {}}))
    again = ChineseHead.load(path)
    assert again.score(ROWS) == head.score(ROWS)
    assert ("hidden" in json.loads(path.read_text())) == bool(hidden)


def test_wrong_shapes_are_refused(tmp_path: Path) -> None:
    zeros, ones = [0.0] * N, [1.0] * N
    with pytest.raises(ValueError):
        ChineseHead(zeros[1:], ones[1:], zeros[1:], 0.0)
    with pytest.raises(ValueError):  # output weights must match the hidden units
        ChineseHead(zeros, ones, zeros, 0.0, _m(N, 3), _v(3))
    with pytest.raises(ValueError):  # hidden bias missing
        ChineseHead(zeros, ones, _v(3), 0.0, _m(N, 3), None)
    other = tmp_path / "zh_head.json"
    head = ChineseHead(zeros, ones, zeros, 0.0).to_json()
    other.write_text(json.dumps({**head, "features": ["cosine"]}))
    with pytest.raises(ValueError, match="other features"):
        ChineseHead.load(other)


def test_order_features_see_a_swap_that_the_characters_do_not() -> None:
    a, b = "从北京到上海的火车", "从上海到北京的火车"
    f = dict(zip(FEATURES, features(a, b, 0.99), strict=True))
    assert f["char_jaccard"] == 1.0 and f["match_ratio"] < 1.0
    same = dict(zip(FEATURES, features(a, a, 1.0), strict=True))
    assert same["match_ratio"] == 1.0 and same["digits_equal"] == 1.0
