"""bench/misfire_intents.py: served hard negatives counted by the intents they join."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.misfire_intents import UNKNOWN, anatomy, by_intent_pair, intent_index, intent_of
from bench.semantic_data import DATA_DIR


@pytest.mark.skipif(not DATA_DIR.exists(), reason="shared data not found")
def test_the_real_sources_name_english_and_chinese_questions() -> None:
    index = intent_index()
    # as written in CLINC150 and BANKING77, folded for case and spacing
    assert intent_of(index, "how much pto do i have") == "clinc150:pto_balance"
    assert intent_of(index, " I am  still waiting on my card?") == "banking77:card_arrival"
    # a translated question and a question written in Chinese
    assert intent_of(index, "你养过宠物吗？") == "clinc150:do_you_have_pets"
    assert intent_of(index, "退款还没到账") == "banking77:Refund_not_showing_up"
    assert intent_of(index, "not a question of any source") == UNKNOWN


def test_pairs_are_counted_per_kind_and_unordered_intent_pair() -> None:
    index = {"a1": "x:one", "a2": "x:one", "b1": "x:two", "c1": "x:three"}
    served = {
        "en/hard": [
            {"a": "A1", "b": "b1"},
            {"a": "b1", "b": "a2"},  # the same pair of intents, the other way round
            {"a": "c1", "b": "a1"},
            {"a": "unknown text", "b": "a1"},
        ],
        "zh/hard": [{"a": "a1", "b": "b1"}],
        "en/entity": [{"a": "a1", "b": "b1"}],  # not a hard negative: not counted
    }
    rows = by_intent_pair(served, index)
    assert rows == [
        {"kind": "en/hard", "intents": ["x:one", "x:two"], "served": 2},
        {"kind": "en/hard", "intents": [UNKNOWN, "x:one"], "served": 1},
        {"kind": "en/hard", "intents": ["x:one", "x:three"], "served": 1},
        {"kind": "zh/hard", "intents": ["x:one", "x:two"], "served": 1},
    ]
    assert sum(r["served"] for r in rows) == 5


def test_a_short_list_is_reported_as_incomplete(tmp_path: Path) -> None:
    index = {"a": "x:one", "b": "x:two"}
    result: dict[str, Any] = {
        "counts": {"en/hard": 100, "en/paraphrase+": 50},
        "embedders": {
            "m": {
                "retrieval_threshold": 0.84,
                "verifier": {"en/hard": 0.02},  # 2 of 100 served
                "served_negatives": {"en/hard": [{"a": "a", "b": "b"}] * 2},
            }
        },
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result))
    assert anatomy(path, index)["m"]["complete"] is True
    assert anatomy(path, index)["m"]["hard_served"] == 2
    result["embedders"]["m"]["verifier"]["en/hard"] = 0.03  # 3 served, 2 listed
    path.write_text(json.dumps(result))
    assert anatomy(path, index)["m"]["complete"] is False


@pytest.mark.skipif(not DATA_DIR.exists(), reason="shared data not found")
def test_a_text_filed_under_two_intents_names_both() -> None:
    index = intent_index()
    # BANKING77 and CLINC150 both hold it, each under its own intent
    assert intent_of(index, "my card declined") == (
        "banking77:declined_card_payment|clinc150:card_declined"
    )
    # a translation shared by two intents
    assert intent_of(index, "你好") == "clinc150:greeting|clinc150:translate"
