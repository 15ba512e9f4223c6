"""EngineConfig's checks that need no model (prefix/config.py)."""

from __future__ import annotations

import pytest

from prefix.config import EngineConfig
from prefix.errors import EngineConfigError


def test_a_step_budget_below_the_running_sequences_is_refused() -> None:
    """With fewer tokens a step than running sequences, decodes went oldest first and the
    newest request waited for the oldest ones to finish (a review: its first token came
    at step 33 of 4-token steps); vLLM refuses the same setting."""
    with pytest.raises(EngineConfigError, match=r"max_num_batched_tokens \(4\) must be >= "):
        EngineConfig(max_num_batched_tokens=4, max_num_seqs=8, prefill_chunk_size=16)
    # the controls: equal, and the defaults
    EngineConfig(max_num_batched_tokens=8, max_num_seqs=8, prefill_chunk_size=16)
    assert EngineConfig().max_num_batched_tokens >= EngineConfig().max_num_seqs
