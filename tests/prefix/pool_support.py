"""Shared helpers of the BlockPool tests (test_block_pool.py, test_eviction.py): a pool
that checks its integrity after every call, chained keys, and request-shaped
admit/run helpers.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prefix.core.block_pool import Allocation, BlockPool
from prefix.core.eviction import (
    EvictionPolicy,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


class Checked:
    """The pool, with check_integrity() after every method call, raising or not."""

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.pool, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            finally:
                self.pool.check_integrity()

        return call


def make(num_blocks: int, policy: EvictionPolicy | str = "lru", **kwargs: Any) -> Any:
    pool = BlockPool(num_blocks, policy, **kwargs)
    pool.check_integrity()
    return Checked(pool)


def chain(*labels: str) -> list[bytes]:
    """Chained 32-byte keys for a path of labels (as real chained keys behave)."""
    keys: list[bytes] = []
    parent = b"root"
    for label in labels:
        parent = hashlib.sha256(parent + b"/" + label.encode()).digest()
        keys.append(parent)
    return keys


def admit(pool: Any, keys: Sequence[bytes], num_private: int = 0) -> Allocation:
    """Pin the cached prefix, allocate the rest (+ private unkeyed blocks), commit new keys."""
    num_hits = len(pool.match_prefix(keys, record=False))
    allocation = pool.allocate_for_prefix(keys, len(keys) - num_hits + num_private)
    assert allocation is not None
    parent: int | None = allocation.hit_block_ids[-1] if allocation.hit_block_ids else None
    for i in range(num_hits, len(keys)):
        parent = pool.commit(allocation.block_table[i], keys[i], parent)
    return allocation


def run(pool: Any, keys: Sequence[bytes], num_private: int = 0) -> Allocation:
    allocation = admit(pool, keys, num_private)
    pool.release(allocation.block_table)
    return allocation


def snapshot(pool: Any) -> bytes:
    return pickle.dumps(pool.pool)
