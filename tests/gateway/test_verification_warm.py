"""The Chinese cross-encoder is loaded at start, in the background, when the embedder
reads Chinese (``auto``, the default, or ``e5``), so the first Chinese lookup does not
wait seconds for it; under MiniLM, which serves no Chinese question, it never loads.
Real verifier, real embedders."""

from __future__ import annotations

import pytest

from gateway.verification import load_verifier, warm_chinese
from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder


def test_the_chinese_verifier_is_warmed_only_where_chinese_is_served(
    embedder: Embedder,
) -> None:
    verifier = load_verifier(threads=1)
    zh = verifier.model.zh_path
    if zh is None:
        pytest.fail("the shipped verifier has a Chinese path")
    assert not zh.is_loaded  # loaded on first use, not at load_verifier
    assert warm_chinese(verifier, embedder) is None  # MiniLM: no Chinese is served
    assert not zh.is_loaded
    routed = RoutedEmbedder(embedder, E5Embedder(progress=False))
    thread = warm_chinese(verifier, routed)  # the default embedder: warmed
    assert thread is not None
    thread.join(120)
    assert zh.is_loaded
    # and it scores: a Chinese paraphrase above an unrelated pair
    same, other = verifier.scores("怎么修改登录密码", ["如何更改我的登录密码", "如何开具发票"])
    assert same > other
