"""The training-only topic pools (bench/verifier_pairs_topics.py): labels follow
intents, siblings make hard negatives, everything lands in ``train``, a pair that
touches a held-out question is dropped, and the committed files keep the shape the
briefs asked for and stay off the evaluation intents. Neighbours come from cheap
hashed character bigrams instead of the real embedders."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from bench.semantic_data import load_banking77, load_clinc150
from bench.verifier_pairs import VPair, split_of
from bench.verifier_pairs_topics import (
    CAPS,
    TOPICS,
    load_questions,
    outside,
    sample,
    source,
    topic_pairs,
)
from tests.bench.test_verifier_pairs_zh import _bigrams

ROWS = [
    ("roaming", "turn-on", ["how do I turn on roaming", "activate roaming before my trip"]),
    ("roaming", "turn-off", ["how do I turn off roaming", "disable roaming please"]),
    ("refunds", "refund-time", ["how long does a refund take", "when will my refund arrive"]),
    ("refunds", "return-time", ["how long does a return take", "return processing time"]),
]


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    path = tmp_path / "pool.jsonl"
    lines = [json.dumps({"cluster": c, "intent": i, "questions": q}) for c, i, q in ROWS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_labels_follow_intents_and_siblings_are_hard_negatives(pool: Path) -> None:
    pairs = topic_pairs(_bigrams, "en", seed=3, path=pool)
    intent = {q.text: q.intent for q in load_questions(pool, "en")}
    assert pairs and {p.split for p in pairs} == {"train"}
    assert {p.source for p in pairs} == {source("en")} == {"topics-en"}
    for p in pairs:
        same = intent[p.a] == intent[p.b]
        assert p.label == int(same), p
        assert (p.kind in {"paraphrase", "paraphrase_random"}) == same
        if p.kind == "unrelated":  # another cluster altogether
            assert intent[p.a].split("/")[0] != intent[p.b].split("/")[0]
    # the near miss the pools were written for: on / off in one cluster, refused
    hard = {frozenset((p.a, p.b)) for p in pairs if p.kind == "hard"}
    assert any({"how do I turn on roaming", "how do I turn off roaming"} == set(h) for h in hard)
    # deterministic for a seed
    assert pairs == topic_pairs(_bigrams, "en", seed=3, path=pool)


def test_a_pair_touching_a_held_out_question_is_dropped(pool: Path) -> None:
    pairs = topic_pairs(_bigrams, "en", seed=3, path=pool)
    held = VPair("How do I turn OFF roaming?", "x", 0, "hard", "en", "eval", "clinc150")
    trained = VPair("how long does a refund take", "y", 1, "paraphrase", "en", "train", "b")
    kept = outside(pairs, [held, trained])
    assert kept and len(kept) < len(pairs)
    assert all("turn off roaming" not in (p.a + p.b) for p in kept)
    # a training-split question of the shared data may appear: nothing is measured on it
    assert any("refund take" in p.a + p.b for p in kept)


def test_sample_caps_each_kind(pool: Path) -> None:
    pairs = topic_pairs(_bigrams, "en", seed=3, path=pool)
    drawn = sample(pairs, {"hard": 1, "paraphrase": 100}, seed=0)
    kinds = Counter(p.kind for p in drawn)
    assert kinds["hard"] == 1 and kinds["paraphrase"] == sum(p.kind == "paraphrase" for p in pairs)
    assert set(kinds) == {"hard", "paraphrase"}
    assert set(CAPS) == {"paraphrase", "paraphrase_random", "hard", "unrelated"}


def _held_out_intents() -> set[str]:
    return {
        q.intent.replace("_", " ")
        for q in load_banking77() + load_clinc150()
        if split_of(f"{q.source}:{q.intent}") != "train"
    }


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_committed_pools_keep_their_shape(lang: str) -> None:
    rows = [json.loads(line) for line in TOPICS[lang].read_text(encoding="utf-8").splitlines()]
    assert len(rows) >= 800
    by_cluster = Counter(r["cluster"] for r in rows)
    assert min(by_cluster.values()) >= 2  # siblings, not lone intents
    texts = [t for r in rows for t in r["questions"]]
    assert len(texts) == len(set(texts)) >= 4800
    assert all(len(r["questions"]) >= 4 for r in rows)
    assert not [t for t in texts if re.search(r"[0-9]", t)]
    if lang == "zh":
        assert all(re.search(r"[\u4e00-\u9fff]", t) for t in texts)
    # no cluster is named after a held-out intent of the shared data
    names = {r["intent"].replace("-", " ") for r in rows} | {
        r["cluster"].split("-", 1)[-1].replace("-", " ") for r in rows
    }
    assert not names & _held_out_intents()
