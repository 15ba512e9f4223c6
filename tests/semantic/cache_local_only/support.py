"""Helpers of the ``lookup(..., local_only=True)`` tests: the answers and policies
stored, asserting a lookup blocked having written nothing, and reading what the cache
holds."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from gateway.sync.log import last_seq
from semantic.cache import SemanticCache
from semantic.errors import WouldBlockError
from semantic.partition import SemanticQuery
from semantic.policy import SemanticPolicy
from tests.semantic.helpers import chat, reply

UNRELATED = "What is the weather in Paris tomorrow?"
OLD = reply("Use the 'forgot password' link.")
NEW = reply("Open Settings, then Security, then Reset.")
#: Entries stored with an expiry, so purge_expired and expiry slides have something to move.
TTL = SemanticPolicy(ttl_seconds=3600)
SLIDING = SemanticPolicy(sliding_ttl=True)
CUT = SemanticPolicy(verifier_cut=0.5)


def blocked(cache: SemanticCache, query: SemanticQuery, policy: SemanticPolicy = TTL) -> str:
    """Assert the local lookup raises WouldBlockError having written nothing; its reason."""
    before = state(cache)
    with pytest.raises(WouldBlockError) as caught:
        cache.lookup(query, policy, local_only=True)
    assert state(cache) == before, "a WouldBlockError lookup wrote something"
    return caught.value.reason


def state(cache: SemanticCache) -> tuple[Any, ...]:
    """Everything a lookup could write: rows, the change log, pending hits, the index."""
    with cache.entries.engine.connect() as conn:
        seq = last_seq(conn)
    rows = tuple(
        (e.id, e.partition_key, e.answer, e.hit_count, e.last_hit_at, e.expires_at, e.updated_at)
        for e in cache.entries.iter_entries()
    )
    pending = cache.hits.pending() if cache.hits is not None else 0
    return seq, rows, pending, {key: _size(cache, key) for key in cache.index.partitions()}


def _size(cache: SemanticCache, key: str) -> int | str:
    # Never waits: the index-busy tests call this while another thread writes.
    try:
        return cache.index.size(key, blocking=False)
    except WouldBlockError:
        return "busy"


def stored_id(
    cache: SemanticCache, question: str, answer: dict[str, Any], tenant: str = "tenant-a"
) -> int:
    result = cache.store(chat(question, tenant=tenant), answer, TTL)
    assert result.stored and result.entry_id is not None, result
    return result.entry_id


def memoized(cache: SemanticCache, entry_id: int, now: datetime) -> bool:
    found, _ = cache.entries.memo.get([entry_id], now)
    return entry_id in found
