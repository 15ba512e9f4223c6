"""Shadow verification's floor is a MiniLM cosine, read on the scale of the embedder
that compares the answers (gateway/review/shadow.py; measured in bench/shadow_scale.py):
e5 scores unrelated answers above 0.80, so there the floor is 0.9375."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from gateway.review.sampling_rule import BOOST_BAND, boost_band
from gateway.review.shadow import compare_answers, floor_for
from gateway.tracing import _Traced
from semantic import Embedder
from semantic.embedder_e5 import E5_MODEL_NAME, E5Embedder, bundled_e5_path
from semantic.embedder_routed import SQUEEZE, RoutedEmbedder

HOURS = "我们的营业时间是早上九点到晚上六点。"
HOURS_AGAIN = "我们每天早上九点开门，晚上六点关门。"
INVOICE = "您可以在账户设置页面申请开具发票。"
REFUND = "Refunds usually arrive within three to five business days."
REFUND_AGAIN = "A refund normally reaches your account in 3 to 5 working days."
CARD = "Your card will be mailed within seven business days."


@pytest.fixture(scope="module")
def e5() -> Iterator[E5Embedder]:
    yield E5Embedder(progress=False)


def test_e5_reads_the_floor_on_its_own_scale(e5: E5Embedder) -> None:
    unrelated = compare_answers(e5, HOURS, INVOICE)
    # e5 puts these two different answers above the MiniLM floor: at 0.80 they agreed
    assert 0.80 <= unrelated.similarity < 0.9375
    assert unrelated.floor == pytest.approx(0.9375)
    assert unrelated.verdict == "disagree"
    # positive control: the same answer in other words still agrees
    same = compare_answers(e5, HOURS, HOURS_AGAIN)
    assert same.similarity >= 0.9375 and same.verdict == "agree"
    # English under e5 alike
    assert compare_answers(e5, REFUND, CARD).verdict == "disagree"
    assert compare_answers(e5, REFUND, REFUND_AGAIN).verdict == "agree"


def test_minilm_keeps_the_floor_as_set(embedder: Embedder) -> None:
    assert floor_for(embedder, 0.80) == 0.80
    same = compare_answers(embedder, REFUND, REFUND_AGAIN)
    assert same.floor == 0.80 and same.verdict == "agree"
    assert compare_answers(embedder, REFUND, CARD).verdict == "disagree"


def test_the_routed_embedder_takes_the_floor_of_the_route_that_compares(
    embedder: Embedder, e5: E5Embedder
) -> None:
    routed = RoutedEmbedder(embedder, e5)
    chinese = compare_answers(routed, HOURS, INVOICE)
    assert chinese.floor == pytest.approx(0.9375) and chinese.verdict == "disagree"
    english = compare_answers(routed, REFUND, REFUND_AGAIN)
    assert english.floor == 0.80 and english.verdict == "agree"
    # a knob set stricter moves both: 0.90 reads as 0.96875 on e5's scale
    assert compare_answers(routed, HOURS, HOURS_AGAIN, 0.90).floor == pytest.approx(0.96875)


def test_the_floor_follows_the_model_not_its_name(e5: E5Embedder) -> None:
    class Renamed:  # not e5, whatever its id says
        embedder_id = "multilingual-e5-small-q4:384:abcd"

    assert floor_for(Renamed(), 0.80) == 0.80  # type: ignore[arg-type]
    # e5 from a model file of another name reads on e5's scale all the same
    copy = E5Embedder(bundled_e5_path(), progress=False)
    assert not copy.embedder_id.startswith(E5_MODEL_NAME)
    assert floor_for(copy, 0.80) == pytest.approx(0.9375)
    assert floor_for(e5, 0.80) == pytest.approx(0.9375)


class _Tracer:
    @contextmanager
    def start_as_current_span(self, name: str) -> Iterator[None]:
        yield


def test_a_traced_embedder_is_read_as_the_embedder_it_wraps(
    embedder: Embedder, e5: E5Embedder
) -> None:
    # With tracing on, the sampler gets the cache's embedder behind a proxy
    # (gateway/tracing.py): it must still route, and still read e5 on e5's scale.
    routed: Any = _Traced(RoutedEmbedder(embedder, e5), "embed", _Tracer(), "embed")
    chinese = compare_answers(routed, HOURS, INVOICE)
    assert chinese.floor == pytest.approx(0.9375) and chinese.verdict == "disagree"
    english = compare_answers(routed, REFUND, REFUND_AGAIN)
    assert english.floor == 0.80
    assert english.similarity == pytest.approx(
        compare_answers(embedder, REFUND, REFUND_AGAIN).similarity, abs=1e-5
    )  # MiniLM's own cosine, not the routed scale's
    assert compare_answers(routed, REFUND, CARD).verdict == "disagree"
    traced_e5: Any = _Traced(e5, "embed", _Tracer(), "embed")
    assert compare_answers(traced_e5, HOURS, INVOICE).floor == pytest.approx(0.9375)


def test_identical_or_empty_answers_apply_no_floor(e5: E5Embedder) -> None:
    same = compare_answers(e5, HOURS, HOURS)
    assert same.verdict == "agree" and same.floor is None
    empty = compare_answers(e5, HOURS, "")
    assert empty.verdict == "disagree" and empty.floor is None


def test_the_sampling_band_narrows_on_autos_minilm_route_also_when_traced(
    embedder: Embedder, e5: E5Embedder
) -> None:
    routed = RoutedEmbedder(embedder, e5)
    traced: Any = _Traced(routed, "embed", _Tracer(), "embed")
    for wrapped in (routed, traced):
        assert boost_band(wrapped, REFUND) == pytest.approx(BOOST_BAND * SQUEEZE)
        assert boost_band(wrapped, HOURS) == BOOST_BAND  # e5's route: its own width
    assert boost_band(embedder, REFUND) == BOOST_BAND  # MiniLM alone: as written
    assert boost_band(None, REFUND) == BOOST_BAND
