"""Fixtures of the local-only lookup tests: a semantic cache with the real embedder on
the real SQLite entry store and the manual clock of tests/semantic/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.store import EntryStore
from tests.semantic.helpers import ManualClock


@pytest.fixture
def cache(embedder: Embedder, store: EntryStore, clock: ManualClock) -> Iterator[SemanticCache]:
    # A flush interval no test reaches: pending hit counts stay in memory until a
    # test flushes them, so "nothing was written" can be read off the database.
    semantic = SemanticCache(embedder, store, clock=clock, hit_flush_seconds=3600)
    yield semantic
    semantic.close()
