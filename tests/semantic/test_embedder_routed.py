"""``auto`` (semantic/embedder_routed.py): English to MiniLM, the rest to e5, one space
where the two never meet, MiniLM's cosine on e5's scale; with the real embedders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import (
    SQUEEZE,
    RoutedEmbedder,
    band_on_routed_scale,
    is_routed,
    knobs_on_e5_scale,
    on_routed_scale,
)
from semantic.embedders import build_embedder
from semantic.latin_language import RULE_VERSION

EN = ["How do I reset my password?", "How can I change my password?", "What is your address?"]
ZH = ["怎么修改登录密码", "如何更改我的登录密码", "你们几点开门几点关门"]


@pytest.fixture(scope="module")
def routed(embedder: Embedder) -> RoutedEmbedder:
    return RoutedEmbedder(embedder, E5Embedder(progress=False))


def test_each_question_goes_to_the_embedder_that_represents_it(routed: RoutedEmbedder) -> None:
    assert [routed.routes_first(t) for t in EN + ZH] == [True] * 3 + [False] * 3
    assert not routed.routes_first("What does 你好 mean?")  # MiniLM cannot see 你好
    assert routed.coverage("What does 你好 mean?") == 1.0  # e5 can
    assert routed.dim == 384 + 1 + 384 and is_routed(routed.embedder_id)
    assert routed.embedder_id.count("+") == 1 and "all-MiniLM-L6-v2" in routed.embedder_id


def test_scores_are_each_embedders_own_and_routes_never_meet(
    routed: RoutedEmbedder, embedder: Embedder
) -> None:
    vectors = routed.embed(EN + ZH)  # one call, both routes, in order
    assert vectors.shape == (6, routed.dim) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cos = vectors @ vectors.T
    # English: MiniLM's cosine, on e5's scale (the ordering is MiniLM's)
    plain = embedder.embed(EN)
    assert np.allclose(cos[:3, :3], 1 - SQUEEZE * (1 - plain @ plain.T), atol=1e-5)
    # Chinese: e5's own cosine, unchanged; a paraphrase above an unrelated question
    e5 = routed.second.embed(ZH)
    assert np.allclose(cos[3:, 3:], e5 @ e5.T, atol=1e-5)
    assert cos[3, 4] > cos[3, 5]
    # Across routes: nothing (an English question never matches a Chinese one)
    assert np.abs(cos[:3, 3:]).max() < 1e-6
    # The squeeze maps MiniLM's retrieval threshold onto e5's
    assert on_routed_scale(0.84) == pytest.approx(0.95) and pytest.approx(0.3125) == SQUEEZE
    assert routed.embed([]).shape == (0, routed.dim)
    with pytest.raises(TypeError):
        routed.embed("a single str")


def test_other_latin_script_languages_go_to_e5_and_never_meet_english(
    routed: RoutedEmbedder, embedder: Embedder
) -> None:
    """Spanish is Latin script MiniLM spells, but never learned: it goes to e5, where
    its paraphrase is near it; the English question of the same meaning is not."""
    es = ["¿Cómo cambio mi contraseña?", "¿Cómo puedo cambiar mi contraseña?"]
    assert [routed.routes_first(t) for t in es] == [False, False]
    assert embedder.coverage(es[0]) == 0.0 and routed.coverage(es[0]) == 1.0
    assert routed.routes_first(EN[1])  # positive control: English stays with MiniLM
    vectors = routed.embed([*es, EN[1]])
    assert np.abs(vectors[:2, : embedder.dim + 1]).max() == 0.0  # only e5's block
    assert float(vectors[0] @ vectors[1]) > 0.9
    assert abs(float(vectors[0] @ vectors[2])) < 1e-6
    # The route rule is part of what a vector means: an embedder without it has its own id.
    assert f":{RULE_VERSION}:" in routed.embedder_id
    bare = Embedder(cpu_threads=1, progress=False, english_only=False)
    assert bare.coverage(es[0]) == 1.0  # the rule off: MiniLM takes it, as before
    assert f":{RULE_VERSION}:" not in RoutedEmbedder(bare, routed.second).embedder_id


def test_the_factory_builds_it_and_refuses_one_path(embedder: Embedder) -> None:
    built = build_embedder("auto", progress=False)
    assert isinstance(built, RoutedEmbedder) and built.first.embedder_id == embedder.embedder_id
    with pytest.raises(ValueError, match="auto"):
        build_embedder("auto", path=Path("/some/model"))


def test_the_id_names_the_scale_and_answers_compare_on_one_plain_scale(
    routed: RoutedEmbedder, embedder: Embedder
) -> None:
    # Another scale or floor makes other vectors: under another id.
    assert routed.embedder_id.startswith("auto:s0.3125:f1:")
    assert RoutedEmbedder(routed.first, routed.second, floor=0.9).embedder_id != routed.embedder_id
    # Two texts are compared on one embedder's own scale (shadow verification's answers).
    assert routed.plain_for(EN) is routed.first
    assert routed.plain_for([EN[0], ZH[0]]) is routed.second
    # A MiniLM width (the sampling band) narrows by SQUEEZE on the first route only.
    assert band_on_routed_scale(0.03, True) == pytest.approx(0.03 * SQUEEZE)
    assert band_on_routed_scale(0.03, False) == 0.03


def test_knobs_are_put_on_e5s_scale_by_what_the_embedder_reads_on(
    routed: RoutedEmbedder, embedder: Embedder
) -> None:
    class AnyE5:  # an e5 model file of another name: its id names the file
        embedder_id, cosine_scale = "my-e5:384:abc", "e5"

    class Proxy:  # as tracing's: every attribute is the wrapped one's
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

    for e5_scaled in (routed, routed.second, AnyE5(), Proxy(routed), Proxy(AnyE5())):
        assert knobs_on_e5_scale(e5_scaled)
    # MiniLM, alone or behind the proxy, takes a knob as given
    assert not knobs_on_e5_scale(embedder) and not knobs_on_e5_scale(Proxy(embedder))
