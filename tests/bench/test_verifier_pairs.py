"""The verifier's labelled pairs (bench/verifier_pairs.py, bench/verifier_perturb.py)
on the real shared data: every kind in every split, and no group crosses splits.
Neighbours come from cheap hashed bag-of-words vectors instead of the embedder."""

from __future__ import annotations

import random
import re
import zlib
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pytest

from bench import verifier_perturb as perturb
from bench.semantic_pairs import DATA_DIR, normalized
from bench.verifier_pairs import SPLITS, VPair, build_pairs, split_of

pytestmark = pytest.mark.skipif(not DATA_DIR.exists(), reason="shared data not found")


def _bag_of_words(texts: Sequence[str]) -> np.ndarray:
    out = np.zeros((len(texts), 256), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in re.findall(r"\w+", t.casefold()):
            out[i, zlib.crc32(w.encode()) % 256] += 1.0
    return out


@pytest.fixture(scope="module")
def pairs() -> list[VPair]:
    return build_pairs(_bag_of_words)


def test_every_kind_in_every_split(pairs: list[VPair]) -> None:
    en_kinds = {
        "paraphrase",
        "paraphrase_random",
        "surface",
        "hard",
        "unrelated",
        "entity",
        "polarity",
        "direction",
        "word_order",
        "context",
        "paws",
    }
    zh_kinds = {"paws", "entity", "polarity", "unrelated", "surface"}
    for split in SPLITS:
        present = {(p.lang, p.kind) for p in pairs if p.split == split}
        assert {("en", k) for k in en_kinds} <= present, split
        assert {("zh", k) for k in zh_kinds} <= present, split
    assert {p.label for p in pairs if p.kind == "paws"} == {0, 1}
    assert all(p.label == 0 for p in pairs if p.kind in ("hard", "entity", "direction", "context"))


def test_no_text_of_one_split_is_in_another_split_of_its_source(pairs: list[VPair]) -> None:
    """BANKING77/CLINC150 split by intent, PAWS-X by sentence component, MeanCache
    by main question: a question (either side) never appears in two splits, within
    one source. Perturbed copies are new texts and follow their original."""
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for p in pairs:
        for text in (p.a, p.b):
            seen[(p.source, normalized(text))].add(p.split)
    crossing = [key for key, splits in seen.items() if len(splits) > 1]
    assert crossing == []


def test_split_is_a_stable_function_of_the_group() -> None:
    assert split_of("banking77:card_arrival") == split_of("banking77:card_arrival")
    shares = [split_of(f"g{i}") for i in range(3000)]
    assert 0.55 < shares.count("train") / 3000 < 0.65
    assert 0.15 < shares.count("eval") / 3000 < 0.25


@pytest.mark.parametrize(
    ("text", "swapped"),
    [
        ("How do I convert Celsius to Fahrenheit?", "How do I convert Fahrenheit to Celsius?"),
        ("transfer $50 from checking to savings", "transfer $50 from savings to checking"),
        ("我想从北京到上海", "我想从上海到北京"),
    ],
)
def test_direction_swaps_the_two_ends(text: str, swapped: str) -> None:
    assert perturb.direction(text) == swapped


def test_rewrites_that_do_not_apply_return_none() -> None:
    rng = random.Random(0)
    assert perturb.direction("what is my balance") is None
    assert perturb.word_order("what is my balance") is None
    assert perturb.word_order("is a cat bigger than a dog") == "is a dog bigger than a cat"
    assert (
        perturb.polarity("why didn't my transfer go through", rng)
        == "why did my transfer go through"
    )
    assert perturb.polarity("这个可以退款吗", rng) == "这个不可以退款吗"


@pytest.mark.parametrize(
    "text",
    [
        "能不能开通自动充值",  # A-not-A asks yes or no: "能能" is no opposite
        "请问我乘坐的航班有没有延误？",
        "可不可以退款",
        "可以不可以退款",
        "我的车是不是快到换机油的时候了？",
        "我的所有交易在哪看",  # the verb inside a longer word: 所有, 功能, 是否, 会员
        "这个功能怎么用",
        "是否需要签证",
        "会员怎么续费",
        "能否退款？",  # the one-word forms of the same question (session 24's review)
        "有无手续费？",
        "取款费用是多少",  # a copula before a question word
        "我只能用信用卡吗？",
        "工会怎么加入？",
        "这个节能模式怎么开？",
    ],
)
def test_chinese_polarity_leaves_questions_without_an_opposite_alone(text: str) -> None:
    assert perturb.polarity(text, random.Random(0)) is None


@pytest.mark.parametrize(
    ("text", "flipped"),
    [
        ("我的卡能用吗", "我的卡不能用吗"),
        ("这不是我的交易", "这是我的交易"),
        ("我有信用卡吗", "我没有信用卡吗"),
        ("这个功能能用吗", "这个功能不能用吗"),  # the verb after the compound
        ("这是我的卡吗", "这不是我的卡吗"),
    ],
)
def test_chinese_polarity_flips_the_verb(text: str, flipped: str) -> None:
    assert perturb.polarity(text, random.Random(0)) == flipped
