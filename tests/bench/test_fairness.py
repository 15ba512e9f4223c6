"""Fair sharing of the engine, loosely (bench/fairness.py measures it): tenant A keeps
more requests in flight than the engine runs at once, through a real gateway (SmolLM2
in-process, 8 running sequences, at most 4 per tenant); tenant B's requests are
admitted next rather than behind A's queue, and prefilled in a step of their own
rather than beside A's decodes (B has nothing decoding: prefill priority), so B's
time to first token stays within 3x of its unloaded value. The goal is 2x: the
bench measures 1.7x with B's arrivals spread over A's steps and 2.4x back to back
(B's request then always waits for almost a whole A step); B here is back to back,
and the margin is for a shared, noisy machine (the median of 5 of B's requests: with
3, one full run of three on a noisy VM measured 4.27x).
Without round-robin admission and the per-tenant cap, B would wait behind A's
queued requests (32 tokens each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fairness import measure
from prefix.model.loader import LoadedModel

pytestmark = pytest.mark.slow


def test_b_ttft_under_a_flood_stays_within_3x_of_unloaded(
    smol_loaded: LoadedModel, tmp_path: Path
) -> None:
    row = measure(
        4,
        smol_loaded,
        tmp_path,
        num_blocks=512,
        max_num_seqs=8,
        flood=16,
        b_requests=5,
        doc_repeats=3,
        a_max_tokens=32,
    )
    assert row["engine_cap"] == 4  # the per-tenant cap reached the engine
    assert row["a_requests_completed"] > 0  # the flood really ran beside B
    assert row["priority_steps"] > 0  # B was prefilled in steps of its own
    assert row["ratio"] <= 3.0, row
