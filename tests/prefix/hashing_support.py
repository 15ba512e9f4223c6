"""Shared constants of the block-identity tests (test_hashing.py, test_block_keys.py)."""

from __future__ import annotations

from pathlib import Path

from prefix.core.hashing import (
    ModelFingerprint,
    chain_root,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
FP = ModelFingerprint(
    model_id="m", weights_digest="d", dtype="float32", block_size=4, position_config="rope"
)
ROOT = chain_root(FP, "ns", "salt")
TOKENS_13 = list(range(100, 113))
