"""The seed's experiment and worked numbers, computed through the real bookkeeping."""

from __future__ import annotations

import pytest

from prefix.lab.experiment import explain, run_experiment
from prefix.lab.numbers import (
    MiB,
    TTFTModel,
    attention_pairs,
    exercise_prefix,
    format_numbers,
    memory_example,
    seed_hit_rate_example,
)
from prefix.lab.trace import TraceConfig, build_trace, compare_policies, replay


@pytest.mark.parametrize(
    ("kwargs", "reused", "recompute"),
    [
        ({}, 4, 9),  # default: 13 tokens, change at 5, B=4
        ({"change_position": 9}, 8, 5),
        ({"block_size": 8}, 0, 13),
        ({"change_position": 0}, 0, 13),
        ({"change_position": 12}, 12, 1),  # change in the tail: every full block hits
        ({"change_position": None}, 12, 1),  # identical prompt: the last token is recomputed
        ({"change_position": None, "num_tokens": 12}, 8, 4),  # N=12, B=4 → reuse 8
    ],
)
def test_experiment_numbers(kwargs: dict, reused: int, recompute: int) -> None:
    r = run_experiment(**kwargs)
    assert (r.reused, r.recompute) == (reused, recompute)


def test_other_namespace_reuses_nothing_and_explain_says_why() -> None:
    r = run_experiment(change_position=None, namespace_b="tenant-b")
    assert r.reused == 0
    text = explain(r)
    assert "different roots" in text and "reused=0 recompute=13" in text
    same = explain(run_experiment())
    assert "first differing token: position 5, inside block 1" in same
    assert "block boundary at 4" in same and "same chain root" in same


def test_bad_experiment_input() -> None:
    with pytest.raises(ValueError):
        run_experiment(change_position=13)
    with pytest.raises(ValueError):
        run_experiment(block_size=0)


def test_memory_example_counts_physical_blocks() -> None:
    m = memory_example()
    assert m.logical_blocks == 3 * 72
    assert m.physical_blocks == 64 + 3 * 8
    assert m.logical_bytes == 432 * MiB
    assert m.physical_bytes == 176 * MiB
    assert m.saved_bytes == 256 * MiB


def test_ttft_teaching_model() -> None:
    c = TTFTModel(fixed_ms=55.0, per_token_ms=0.05).compare(4000, 3072)
    assert c["prefill_tokens_saved_pct"] == pytest.approx(76.8)
    assert c["ttft_reduction_pct"] == pytest.approx(60.24, abs=0.005)
    assert c["speedup"] == pytest.approx(2.515, abs=0.0005)


def test_attention_pairs_and_hit_rates() -> None:
    a = attention_pairs(4096, 3072)
    assert (a["full_pairs"], a["remaining_pairs"]) == (8_390_656, 3_670_528)
    assert a["pairs_saved_pct"] == pytest.approx(56.25, abs=0.005)
    h = seed_hit_rate_example()
    assert h["request_hit_rate_pct"] == pytest.approx(99.0, abs=0.05)
    assert h["token_hit_rate_pct"] == pytest.approx(9.1, abs=0.05)


def test_exercise_prefix_35_block_16() -> None:
    assert exercise_prefix() == {
        "prefix_tokens": 35,
        "block_size": 16,
        "reused": 32,
        "recomputed_prefix_tokens": 3,
    }


def test_format_numbers_mentions_every_result() -> None:
    text = format_numbers(TTFTModel(fixed_ms=10.0, per_token_ms=0.2))
    for needle in (
        "432 MiB -> 176 MiB",
        "saved 256 MiB",
        "-60.24%",
        "2.515x",
        "8,390,656",
        "3,670,528",
        "56.25%",
        "99.0%",
        "9.1%",
        "reused=32",
        "measured",
    ):
        assert needle in text


def test_trace_reports_request_and_token_hit_rates_and_coverage_helps() -> None:
    cfg = TraceConfig(num_requests=600)
    trace = build_trace(cfg)
    lru = replay(trace, cfg, "lru")
    coverage = replay(trace, cfg, "coverage")
    for r in (lru, coverage):
        assert 0.0 < r.token_hit_rate < r.request_hit_rate <= 1.0
        assert r.num_evictions > 0
    # a short prefix everyone uses outlives the cold unique tails under "coverage"
    assert coverage.request_hit_rate >= lru.request_hit_rate
    assert coverage.token_hit_rate >= lru.token_hit_rate
    assert "request hit rate" in compare_policies(TraceConfig(num_requests=50))
