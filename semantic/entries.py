"""A semantic cache entry as the store takes it (:class:`NewEntry`) and returns it
(:class:`StoredEntry`, detached from any session, so it crosses threads freely), and
the decoding of a ``semantic_entries`` row into one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Table

from semantic.models import SemanticEntry


@dataclass(frozen=True)
class NewEntry:
    """What the cache writes; the store derives the normalized question and its digest."""

    partition_key: str
    tenant: str
    question: str
    answer: dict[str, Any]
    embedding: NDArray[np.float32]
    embedder_id: str
    entities: dict[str, Any] | None = None
    expires_at: datetime | None = None
    ttl_seconds: int | None = None


@dataclass(frozen=True)
class StoredEntry:
    """One row of ``semantic_entries``, detached from any session."""

    id: int
    partition_key: str
    tenant: str
    question: str
    normalized_question: str
    answer: dict[str, Any]
    embedding: NDArray[np.float32] = field(repr=False, compare=False)
    embedder_id: str
    entities: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    ttl_seconds: int | None
    hit_count: int
    last_hit_at: datetime | None

    def is_expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


TABLE = cast(Table, SemanticEntry.__table__)
#: StoredEntry's fields read from a row as they are (the embedding is decoded).
_ROW_FIELDS = tuple(f.name for f in fields(StoredEntry) if f.name != "embedding")


def to_entry(row: SemanticEntry) -> StoredEntry:
    return row_to_entry({c.key: getattr(row, c.key) for c in TABLE.columns})


def row_to_entry(row: Mapping[Any, Any]) -> StoredEntry:
    """A Core row of ``semantic_entries`` (same column names as the ORM attributes)."""
    embedding = np.frombuffer(row["embedding"], dtype="<f4").astype(np.float32)
    return StoredEntry(**{name: row[name] for name in _ROW_FIELDS}, embedding=embedding)
