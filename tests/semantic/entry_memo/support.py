"""Helpers of the entry-memo tests: a fake monotonic clock, decoded rows to keep, and
putting them with the current generation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from semantic.entry_memo import EntryMemo
from semantic.store import StoredEntry

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
PART_A = "a" * 64
PART_B = "b" * 64


class FakeClock:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def row(
    entry_id: int,
    *,
    partition_key: str = PART_A,
    expires_at: datetime | None = NOW + timedelta(hours=1),
    answer: str = "Click 'forgot'.",
) -> StoredEntry:
    vec = np.arange(1, 5, dtype=np.float32)
    return StoredEntry(
        id=entry_id,
        partition_key=partition_key,
        tenant="tenant-a",
        question=f"question {entry_id}",
        normalized_question=f"question {entry_id}",
        answer={"choices": [{"message": {"content": answer}}]},
        embedding=vec / np.linalg.norm(vec),
        embedder_id="emb:4:abc",
        entities=None,
        created_at=NOW - timedelta(minutes=5),
        updated_at=NOW - timedelta(minutes=5),
        expires_at=expires_at,
        ttl_seconds=3600,
        hit_count=0,
        last_hit_at=None,
    )


def put(memo: EntryMemo, *rows: StoredEntry) -> bool:
    """Put with the current generation (nothing raced): always kept when enabled."""
    return memo.put(rows, memo.generation())


def kept_ids(memo: EntryMemo) -> list[int]:
    """The ids held, least recently used first."""
    return list(memo._rows)
