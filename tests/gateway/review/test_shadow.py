"""Shadow verification's floor is a MiniLM cosine, read on the scale of the embedder
that compares the answers (gateway/review/shadow.py; measured in bench/shadow_scale.py):
e5 scores unrelated answers above 0.80, so there the floor is 0.9375."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.review.shadow import compare_answers, floor_for
from semantic import Embedder
from semantic.embedder_e5 import E5Embedder
from semantic.embedder_routed import RoutedEmbedder

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


def test_an_embedder_of_another_name_keeps_the_floor_as_set(e5: E5Embedder) -> None:
    class Renamed:
        embedder_id = "my-e5-finetune:384:abcd"

    assert floor_for(Renamed(), 0.80) == 0.80  # type: ignore[arg-type]
    assert floor_for(e5, 0.80) == pytest.approx(0.9375)
