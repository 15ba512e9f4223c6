"""bench/misfire_intents.py: served hard negatives counted by the intents they join."""

from __future__ import annotations

from bench.misfire_intents import UNKNOWN, by_intent_pair, intent_index, intent_of


def test_the_real_sources_name_english_and_chinese_questions() -> None:
    index = intent_index()
    # as written in CLINC150 and BANKING77, folded for case and spacing
    assert intent_of(index, "how much pto do i have") == "clinc150:pto_balance"
    assert intent_of(index, " I am  still waiting on my card?") == "banking77:card_arrival"
    # a translated question and a question written in Chinese
    assert intent_of(index, "你好") == "clinc150:greeting"
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
