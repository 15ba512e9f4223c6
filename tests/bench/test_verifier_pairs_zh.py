"""The verifier's Chinese intent pairs (bench/verifier_pairs_zh.py and their place in
bench/verifier_pairs.py): labels follow intents and values, and, on the committed
translations and written questions, no Chinese intent crosses splits, the English
pairs do not change when the Chinese ones are added, nor the translated ones (or
their eval sample) when the written ones are. Neighbours come from cheap hashed
character bigrams instead of multilingual-e5-small."""

from __future__ import annotations

import json
import random
import zlib
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from bench.semantic_data import load_banking77, load_clinc150
from bench.semantic_pairs import DATA_DIR
from bench.verifier_eval import sample_eval
from bench.verifier_pairs import SPLITS, VPair, build_pairs, report_lang, split_of
from bench.verifier_pairs_zh import (
    ZH_QUESTIONS,
    ZH_WRITTEN,
    ZhQuestion,
    intent_pairs_zh,
    is_written,
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


def test_written_pairs_carry_their_own_tag() -> None:
    pairs = intent_pairs_zh(POOL, _bigrams([q.zh for q in POOL]), random.Random(0), "zhw")
    assert pairs and {p.source for p in pairs} <= {"banking77-zhw", "clinc150-zhw"}
    assert all(is_written(p.source) for p in pairs)
    assert not is_written("banking77-zh") and not is_written("pawsx-zh")
    written = VPair("a", "b", 1, "paraphrase", "zh", "eval", "clinc150-zhw")
    assert report_lang(written) == "zhw"
    assert report_lang(VPair("a", "b", 1, "paraphrase", "zh", "eval", "clinc150-zh")) == "zh"
    assert report_lang(VPair("a", "b", 1, "paws", "en", "eval", "pawsx-en")) == "en"


def test_written_questions_are_eight_per_intent_of_the_shared_data() -> None:
    rows = [json.loads(line) for line in ZH_WRITTEN.read_text("utf-8").splitlines() if line]
    per_intent: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in rows:
        assert set(r) == {"source", "intent", "en", "zh"}
        assert any("\u4e00" <= ch <= "\u9fff" for ch in r["zh"]), r["zh"]
        per_intent[(r["source"], r["intent"])].add(zh_key(r["zh"]))
    assert all(len(texts) == 8 for texts in per_intent.values())
    owners: dict[tuple[str, str], int] = defaultdict(int)
    for (source, _), texts in per_intent.items():
        for t in texts:
            owners[(source, t)] += 1
    assert max(owners.values()) == 1  # no question filed under two intents
    if DATA_DIR.exists():
        shared = {(q.source, q.intent) for q in load_banking77() + load_clinc150()}
        assert set(per_intent) == shared - {("clinc150", "oos")}


needs_data = pytest.mark.skipif(
    not (DATA_DIR.exists() and ZH_QUESTIONS.exists() and ZH_WRITTEN.exists()),
    reason="shared data or bench/data/zh_*_questions.jsonl not found",
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
    language. Across the two files too: a written question that is also a translated
    one of another split ("谢谢", a translation filed under `translate`, written for
    `thank_you`) is left out."""
    intent_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    for tag, path in (("zh", ZH_QUESTIONS), ("zhw", ZH_WRITTEN)):
        for q in load_zh_questions(path):
            intent_of[(tag, zh_key(q.zh))].add(f"{q.source}:{q.intent}")
    zh_intent = [
        p for p in with_zh if p.lang == "zh" and p.source.split("-")[0] in ("banking77", "clinc150")
    ]
    for tag in ("zh", "zhw"):
        tagged = [p for p in zh_intent if p.source.endswith(f"-{tag}")]
        assert {p.kind for p in tagged} >= INTENT_KINDS | {"surface"}, tag
        for split in SPLITS:
            assert {p.kind for p in tagged if p.split == split} >= INTENT_KINDS, (tag, split)
    checked = 0
    splits_of_text: dict[str, set[str]] = defaultdict(set)
    for p in zh_intent:
        tag = p.source.rsplit("-", 1)[1]
        for text in (p.a, p.b):
            splits_of_text[zh_key(text)].add(p.split)
            groups = intent_of.get((tag, zh_key(text)))
            if groups is None:  # a rewrite (entity, polarity, surface ...) of a question
                continue
            assert {split_of(g) for g in groups} == {p.split}
            checked += 1
    assert {t for t, splits in splits_of_text.items() if len(splits) > 1} == set()
    assert checked > 2000


@needs_data
def test_english_pairs_do_not_change_when_chinese_are_added(with_zh: list[VPair]) -> None:
    without = build_pairs(_words)
    assert [p for p in with_zh if p.lang == "en"] == [p for p in without if p.lang == "en"]
    zh_sources = {p.source for p in with_zh if p.lang == "zh"} - {
        p.source for p in without if p.lang == "zh"
    }
    assert zh_sources == {"banking77-zh", "clinc150-zh", "banking77-zhw", "clinc150-zhw"}


@needs_data
def test_translated_pairs_and_their_sample_do_not_change_when_written_are_added(
    with_zh: list[VPair], tmp_path: Path
) -> None:
    without = build_pairs(_words, embed_zh=_bigrams, zh_written=tmp_path / "none.jsonl")
    assert not any(is_written(p.source) for p in without)
    assert [p for p in with_zh if not is_written(p.source)] == without
    for split in ("eval", "cal"):
        sampled = sample_eval(with_zh, 50, split=split)
        assert any(is_written(p.source) for p in sampled)
        assert [p for p in sampled if not is_written(p.source)] == sample_eval(
            without, 50, split=split
        )
