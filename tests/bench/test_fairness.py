"""Fair sharing of the engine, loosely (bench/fairness.py measures it): while tenant A
keeps long-prompt requests in flight through a real gateway (SmolLM2 in-process),
tenant B's time to first token stays within 4x of its unloaded value."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fairness import measure
from prefix.model.loader import LoadedModel

pytestmark = pytest.mark.slow


def test_b_ttft_under_a_flood_stays_within_4x_of_unloaded(
    smol_loaded: LoadedModel, tmp_path: Path
) -> None:
    row = measure(
        16,
        smol_loaded,
        tmp_path,
        num_blocks=512,
        flood=12,
        b_requests=3,
        doc_repeats=3,
        a_max_tokens=32,
    )
    assert row["engine_cap"] == 16  # the default per-tenant cap reached the engine
    assert row["a_requests_completed"] > 0  # the flood really ran beside B
    assert row["ratio"] <= 4.0, row
