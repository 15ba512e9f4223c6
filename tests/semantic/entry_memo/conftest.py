"""Fixtures of the entry memo tests: a memo of three rows kept ten seconds on a fake
clock (this folder's ``clock`` is the memo's own, not tests/semantic/conftest.py's)."""

from __future__ import annotations

import pytest

from semantic.entry_memo import EntryMemo
from tests.semantic.entry_memo.support import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def memo(clock: FakeClock) -> EntryMemo:
    return EntryMemo(size=3, max_age=10.0, clock=clock)
