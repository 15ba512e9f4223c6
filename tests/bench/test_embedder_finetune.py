"""bench/embedder_finetune.py: the retrieval embedder trains on training intents only,
and its report reads the trade off the eval pairs as stated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import embedder_finetune_eval as fe
from bench.embedder_finetune import groups, held_texts
from bench.semantic_data import DATA_DIR, normalized
from bench.verifier_pairs import split_of
from bench.verifier_pairs_zh import zh_key


def _pairs_file(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def test_held_texts_are_every_calibration_and_eval_question_of_the_language(
    tmp_path: Path,
) -> None:
    row: dict[str, object] = {"label": 1, "kind": "paraphrase", "source": "s"}
    path = _pairs_file(
        tmp_path,
        [
            row | {"a": "How do I  reset it?", "b": "Reset it", "lang": "en", "split": "eval"},
            row | {"a": "Close my account", "b": "Shut it", "lang": "en", "split": "cal"},
            row | {"a": "Trained on", "b": "Also trained", "lang": "en", "split": "train"},
            row | {"a": "怎么重置？", "b": "重置", "lang": "zh", "split": "eval"},
        ],
    )
    assert held_texts("en", path) == {
        "how do i reset it",
        "reset it",
        "close my account",
        "shut it",
    }
    assert held_texts("zh", path) == {"怎么重置", "重置"}


@pytest.mark.skipif(not DATA_DIR.exists(), reason="shared data not found")
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_groups_hold_training_intents_only_and_never_a_held_question(lang: str) -> None:
    unheld, _ = groups(lang, set())
    shared = sorted(k for k in unheld if not k.startswith("topic:"))
    # a held question (here: the first of a shared intent's) is left out wherever it was
    held_text = unheld[shared[0]][0]
    fold = zh_key if lang == "zh" else normalized
    by_intent, hood = groups(lang, {fold(held_text)})
    assert all(held_text not in texts for texts in by_intent.values())
    assert all(len(set(texts)) >= 2 for texts in by_intent.values())
    assert set(hood) == set(by_intent)
    for key in by_intent:
        if not key.startswith("topic:"):  # the shared data: its training intents alone
            assert split_of(key) == "train"
    assert any(k.startswith("topic:") for k in by_intent)
    assert set(by_intent) <= set(unheld)


def test_the_trade_is_the_most_positives_within_each_hard_share() -> None:
    class Pairs:
        verified = np.asarray([True, True, True, True, False, True])

    positive = np.asarray([True, True, True, False, False, False])
    hard = ~positive
    cos = np.asarray([0.95, 0.90, 0.80, 0.852, 0.99, 0.60])
    best = fe._best(Pairs(), cos, positive, hard)  # type: ignore[arg-type]
    # above 0.852 no verified hard negative is served: two of three positives
    assert best["hard<=0.005"] == {"T": 0.855, "kept": 0.6667, "hard": 0.0, "retrieved": 0.6667}
    # one hard negative of three served is a third, over every limit: the same trade
    assert best["hard<=0.015"] == best["hard<=0.005"]
    # 0.95 and 0.90 outrank two hard negatives each, 0.80 one: 5 of 9
    assert fe._auc(cos[positive | hard], positive[positive | hard]) == round(5 / 9, 4)
