"""The verifier's Chinese intent pairs (bench/verifier_pairs_zh.py and their place in
bench/verifier_pairs.py): labels follow intents and values, and, on the committed
translations, no Chinese intent crosses splits and the English pairs do not change
when the Chinese ones are added. Neighbours come from cheap hashed character
bigrams instead of multilingual-e5-small."""

from __future__ import annotations

import json
import random
import zlib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from bench.semantic_pairs import DATA_DIR
from bench.verifier_pairs import SPLITS, VPair, build_pairs, split_of
from bench.verifier_pairs_zh import (
    ZH_QUESTIONS,
    ZhQuestion,
    intent_pairs_zh,
    load_zh_questions,
    zh_key,
)

INTENT_KINDS = {"paraphrase", "paraphrase_random", "hard", "unrelated"}


def _bigrams(texts: Sequence[str]) -> np.ndarray:
    out = np.zeros((len(texts), 512), dtype=np.float32)
    for i, t in enumerate(texts):
        chars = t.casefold()
        for j in range(len(chars)):
            out[i, zlib.crc32(chars[j : j + 2].encode()) % 512] += 1.0
    return out


POOL = [
    ZhQuestion("我的卡什么时候到", "When will my card arrive?", "card_arrival", "banking77"),
    ZhQuestion("我的卡多久能寄到", "How long until my card arrives?", "card_arrival", "banking77"),
    ZhQuestion("卡片寄送要几天", "How many days for card delivery?", "card_delivery", "banking77"),
    ZhQuestion("给我转20美元", "Send me $20", "transfer", "banking77"),
    ZhQuestion("给我转500美元", "Send me $500", "transfer", "banking77"),
    ZhQuestion("明天会下雨吗", "Will it rain tomorrow?", "weather", "clinc150"),
]


def test_labels_follow_intents_and_values() -> None:
    pairs = intent_pairs_zh(POOL, _bigrams([q.zh for q in POOL]), random.Random(0))
    of = {q.zh: q for q in POOL}
    kinds = {p.kind for p in pairs}
    assert {"paraphrase", "hard"} <= kinds
    for p in pairs:
        qa, qb = of[p.a], of[p.b]
        assert p.source == f"{qa.source}-zh"
        if p.label:
            assert p.kind in ("paraphrase", "paraphrase_random")
            assert qa.intent == qb.intent
        else:
            assert qa.intent != qb.intent
        if p.kind == "hard":
            assert qa.source == qb.source  # neighbours within one dataset, as in English
    # Same intent but another amount: not a positive (the English value rule).
    assert not any(p.label and {p.a, p.b} == {"给我转20美元", "给我转500美元"} for p in pairs)
    # The nearest other-intent question of the card question is the delivery one.
    hard = {frozenset((p.a, p.b)) for p in pairs if p.kind == "hard"}
    assert (
        frozenset(("卡片寄送要几天", "我的卡多久能寄到")) in hard
        or frozenset(("卡片寄送要几天", "我的卡什么时候到")) in hard
    )


def test_one_vector_per_question() -> None:
    with pytest.raises(ValueError):
        intent_pairs_zh(POOL, _bigrams(["x"]), random.Random(0))


def test_loader_keeps_one_row_per_chinese_text(tmp_path: Path) -> None:
    path = tmp_path / "zh.jsonl"
    rows = [
        {"source": "banking77", "intent": "a", "en": "one", "zh": "你好吗"},
        {
            "source": "banking77",
            "intent": "b",
            "en": "two",
            "zh": "你好吗？",
        },  # same once normalized
        {"source": "clinc150", "intent": "c", "en": "three", "zh": "你好吗"},  # other dataset
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    got = load_zh_questions(path)
    assert [(q.source, q.intent) for q in got] == [("banking77", "a"), ("clinc150", "c")]
    assert load_zh_questions(tmp_path / "missing.jsonl") == []


needs_data = pytest.mark.skipif(
    not (DATA_DIR.exists() and ZH_QUESTIONS.exists()),
    reason="shared data or bench/data/zh_intent_questions.jsonl not found",
)


def _words(texts: Sequence[str]) -> np.ndarray:
    out = np.zeros((len(texts), 256), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in t.casefold().split():
            out[i, zlib.crc32(w.encode()) % 256] += 1.0
    return out


@pytest.fixture(scope="module")
def with_zh() -> list[VPair]:
    return build_pairs(_words, embed_zh=_bigrams)


@needs_data
def test_chinese_intent_pairs_never_cross_splits(with_zh: list[VPair]) -> None:
    """Every Chinese intent question sits in the split of its English intent, and a
    pair's two sides in one split: a Chinese eval intent is trained on in neither
    language."""
    intent_of: dict[str, set[str]] = defaultdict(set)
    for q in load_zh_questions():
        intent_of[zh_key(q.zh)].add(f"{q.source}:{q.intent}")
    zh_intent = [p for p in with_zh if p.source in ("banking77-zh", "clinc150-zh")]
    assert {p.kind for p in zh_intent} >= INTENT_KINDS | {"surface"}
    for split in SPLITS:
        assert {p.kind for p in zh_intent if p.split == split} >= INTENT_KINDS, split
    checked = 0
    for p in zh_intent:
        for text in (p.a, p.b):
            groups = intent_of.get(zh_key(text))
            if groups is None:  # a rewrite (entity, polarity, surface ...) of a question
                continue
            assert {split_of(g) for g in groups} == {p.split}
            checked += 1
    assert checked > 1000


@needs_data
def test_english_pairs_do_not_change_when_chinese_are_added(with_zh: list[VPair]) -> None:
    without = build_pairs(_words)
    assert [p for p in with_zh if p.lang == "en"] == [p for p in without if p.lang == "en"]
    zh_sources = {p.source for p in with_zh if p.lang == "zh"} - {
        p.source for p in without if p.lang == "zh"
    }
    assert zh_sources == {"banking77-zh", "clinc150-zh"}
