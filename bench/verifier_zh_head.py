"""Fitting the verifier's Chinese head (validators/verifier_zh.py) on the Chinese
training split (bench/train_verifier.py).

``training_pairs`` takes at most ``ZH_CAPS[kind]`` training pairs of each Chinese
kind (so that no kind is drowned: there are ~10x more ``unrelated`` pairs than
``direction`` ones), ``design`` turns pairs into the head's feature rows (one
multilingual-e5-small embedding per distinct text), and ``fit_head`` fits either
the logistic regression of the first heads or one with a small hidden layer (an
MLP, ``hidden`` units), both stored in ``zh_head.json`` and run with numpy alone.
Which one ships is chosen on the calibration split (MODEL_CARD.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from bench.verifier_pairs import VPair, sample_train
from validators import verifier_zh

#: Chinese training pairs per kind. PAWS-X zh and the intent kinds (paraphrase,
#: hard) are what the head must separate; the rewrites and unrelated pairs are easy
#: and only need to be present.
ZH_CAPS = {
    "paws": 1200,
    "paraphrase": 1500,
    "paraphrase_random": 700,
    "hard": 1500,
    "unrelated": 400,
    "entity": 500,
    "polarity": 500,
    "direction": 200,
    "word_order": 300,
    "surface": 300,
}


def training_pairs(pairs: Sequence[VPair], seed: int) -> list[VPair]:
    return sample_train(pairs, ZH_CAPS, "zh", seed)


def design(pairs: Sequence[VPair], e5: verifier_zh.E5Vectors) -> NDArray[np.float64]:
    """One row of ``verifier_zh.FEATURES`` per pair, as the verifier computes it."""
    texts = sorted({t for p in pairs for t in (p.a, p.b)})
    row = {t: i for i, t in enumerate(texts)}
    vectors = e5.embed(texts)  # (distinct texts, 384)
    return np.asarray(
        [
            verifier_zh.features(p.a, p.b, float(vectors[row[p.a]] @ vectors[row[p.b]]))
            for p in pairs
        ],
        dtype=np.float64,
    )


def fit_head(
    x: NDArray[np.float64], y: NDArray[np.int64], hidden: int = 0, seed: int = 12
) -> verifier_zh.ChineseHead:
    """Logistic regression (``hidden`` 0) or one relu layer of ``hidden`` units,
    on standardised features; classes weighted equally."""
    mean, std = x.mean(axis=0), np.maximum(x.std(axis=0), 1e-6)
    z = (x - mean) / std
    if hidden == 0:
        from sklearn.linear_model import LogisticRegression

        lr = LogisticRegression(C=1.0, max_iter=2000, class_weight="balanced")
        lr.fit(z, y)
        return verifier_zh.ChineseHead(
            mean.tolist(), std.tolist(), lr.coef_[0].tolist(), float(lr.intercept_[0])
        )
    from sklearn.neural_network import MLPClassifier

    # MLPClassifier has no class weights: balance by repeating the rarer class.
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    rare, common = (pos, neg) if len(pos) < len(neg) else (neg, pos)
    rng = np.random.default_rng(seed)
    extra = rng.choice(rare, size=len(common) - len(rare), replace=True) if len(rare) else rare
    idx = np.concatenate([common, rare, extra])
    mlp = MLPClassifier(
        hidden_layer_sizes=(hidden,),
        activation="relu",
        alpha=1e-3,
        max_iter=800,
        early_stopping=True,
        random_state=seed,
    )
    mlp.fit(z[idx], y[idx])
    return verifier_zh.ChineseHead(
        mean.tolist(),
        std.tolist(),
        mlp.coefs_[1][:, 0].tolist(),
        float(mlp.intercepts_[1][0]),
        hidden_w=mlp.coefs_[0].tolist(),
        hidden_b=mlp.intercepts_[0].tolist(),
    )
