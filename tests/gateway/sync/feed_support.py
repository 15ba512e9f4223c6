"""Helpers of the replica-sync tests: two replicas (two caches, two stores, one
database), a running feed, and waiting on a condition with its measured delay."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gateway.sync.feed import ChangeFeed
from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.partition import SemanticQuery
from semantic.store import EntryStore
from tests.semantic.helpers import reply


@contextmanager
def replicas(url: str, embedder: Embedder) -> Iterator[tuple[SemanticCache, SemanticCache]]:
    """Replica A and replica B: separate in-memory indexes over one database."""
    a, b = SemanticCache(embedder, EntryStore(url)), SemanticCache(embedder, EntryStore(url))
    try:
        yield a, b
    finally:
        a.entries.close()
        b.entries.close()


@contextmanager
def feeding(url: str, cache: SemanticCache | None, **options: Any) -> Iterator[ChangeFeed]:
    feed = ChangeFeed(url, cache, **options)
    feed.start()
    try:
        yield feed
    finally:
        feed.stop()


def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> float | None:
    """Seconds until ``cond()`` held, or None if it never did within ``timeout``."""
    started = time.monotonic()
    while not cond():
        if time.monotonic() - started > timeout:
            return None
        time.sleep(0.005)
    return time.monotonic() - started


def store(cache: SemanticCache, query: SemanticQuery, text: str = "An answer.") -> int:
    result = cache.store(query, reply(text))
    assert result.stored and result.entry_id is not None, result
    return result.entry_id


def hits(cache: SemanticCache, query: SemanticQuery) -> Callable[[], bool]:
    return lambda: cache.lookup(query).hit


def indexed(cache: SemanticCache, query: SemanticQuery, entry_id: int) -> Callable[[], bool]:
    """Whether ``entry_id`` is in ``cache``'s index (no lookup: lookups also drop
    vanished rows by themselves, which would hide what the feed did)."""

    def check() -> bool:
        index = cache.index.get(cache.partition_key(query))
        return index is not None and entry_id in index

    return check
