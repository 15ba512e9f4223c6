"""The memo of decoded rows: hits and misses by id, the LRU bound, disabled and invalid
configurations, and its integrity check (age: test_entry_memo_age.py; writes and races:
test_entry_memo_forget.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from semantic.entry_memo import EntryMemo
from tests.semantic.entry_memo.support import NOW, PART_A, FakeClock, kept_ids, put, row

# -- hits and misses -------------------------------------------------------------------


def test_hit_returns_the_row_put_and_miss_lists_the_rest(memo: EntryMemo) -> None:
    one, two = row(1), row(2)
    assert put(memo, one, two) is True
    assert len(memo) == 2
    found, missing = memo.get([2, 7, 1, 9], NOW)
    assert found == {1: one, 2: two}
    assert found[1] is one and found[2] is two  # the decoded row itself, not a copy
    assert missing == [7, 9]  # in the order asked
    memo.check_integrity()


def test_empty_memo_misses_everything(memo: EntryMemo) -> None:
    assert memo.get([1, 2], NOW) == ({}, [1, 2])
    assert memo.get([], NOW) == ({}, [])
    memo.check_integrity()


def test_get_accepts_any_iterable(memo: EntryMemo) -> None:
    put(memo, row(1), row(2))
    found, missing = memo.get(iter([1, 3]), NOW)
    assert list(found) == [1] and missing == [3]
    memo.check_integrity()


def test_put_replaces_a_row_by_id(memo: EntryMemo) -> None:
    put(memo, row(1, answer="old"))
    newer = row(1, answer="new")
    put(memo, newer)
    assert len(memo) == 1
    assert memo.get([1], NOW)[0][1] is newer
    memo.check_integrity()


def test_put_of_nothing_is_kept_and_harmless(memo: EntryMemo) -> None:
    assert memo.put([], memo.generation()) is True
    assert len(memo) == 0
    memo.check_integrity()


# -- the LRU bound ---------------------------------------------------------------------


def test_bound_evicts_the_least_recently_put(memo: EntryMemo) -> None:
    put(memo, row(1), row(2), row(3))
    put(memo, row(4))
    assert len(memo) == 3
    assert kept_ids(memo) == [2, 3, 4]
    assert memo.get([1, 2, 3, 4], NOW)[1] == [1]
    memo.check_integrity()


def test_a_hit_refreshes_recency(memo: EntryMemo) -> None:
    put(memo, row(1), row(2), row(3))
    memo.get([1], NOW)  # 1 is now the most recently used: 2 goes next
    put(memo, row(4))
    assert kept_ids(memo) == [3, 1, 4]
    put(memo, row(5))
    assert kept_ids(memo) == [1, 4, 5]
    assert memo.get([1, 2, 3], NOW)[1] == [2, 3]
    memo.check_integrity()


def test_a_miss_does_not_refresh_recency(memo: EntryMemo) -> None:
    put(memo, row(1, expires_at=NOW))  # expired at NOW: a miss, and not touched
    put(memo, row(2), row(3))
    assert memo.get([1], NOW) == ({}, [1])
    put(memo, row(4))
    assert kept_ids(memo) == [2, 3, 4]
    memo.check_integrity()


def test_putting_again_refreshes_recency(memo: EntryMemo) -> None:
    put(memo, row(1), row(2), row(3))
    put(memo, row(1))
    put(memo, row(4))
    assert kept_ids(memo) == [3, 1, 4]
    memo.check_integrity()


def test_one_put_larger_than_the_bound_keeps_its_last_rows(memo: EntryMemo) -> None:
    assert put(memo, *(row(i) for i in range(1, 8))) is True
    assert kept_ids(memo) == [5, 6, 7]
    memo.check_integrity()


def test_size_one(clock: FakeClock) -> None:
    memo = EntryMemo(size=1, max_age=10.0, clock=clock)
    put(memo, row(1))
    put(memo, row(2))
    assert memo.get([1, 2], NOW) == ({2: row(2)}, [1])
    memo.check_integrity()


# -- disabled and invalid configurations --------------------------------------------------


@pytest.mark.parametrize(("size", "max_age"), [(0, 10.0), (3, 0.0), (0, 0.0)])
def test_size_or_age_zero_disables_the_memo(clock: FakeClock, size: int, max_age: float) -> None:
    memo = EntryMemo(size=size, max_age=max_age, clock=clock)
    assert memo.is_enabled is False
    assert memo.put([row(1)], memo.generation()) is False
    assert len(memo) == 0
    assert memo.get([1], NOW) == ({}, [1])
    memo.forget([1])
    memo.forget_partition(PART_A)
    memo.clear()
    memo.check_integrity()


def test_enabled_with_a_size_and_an_age(memo: EntryMemo) -> None:
    assert memo.is_enabled is True


def test_defaults() -> None:
    memo = EntryMemo()
    assert memo.size == 4096 and memo.max_age == 10.0 and memo.is_enabled
    assert memo.put([row(1)], memo.generation()) is True  # the real monotonic clock
    assert memo.get([1], NOW)[1] == []
    memo.check_integrity()


@pytest.mark.parametrize(("size", "max_age"), [(-1, 10.0), (3, -0.5), (-1, -1.0)])
def test_negative_size_or_age_is_refused(size: int, max_age: float) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        EntryMemo(size=size, max_age=max_age)


# -- integrity -------------------------------------------------------------------------


def test_integrity_detects_a_key_holding_another_rows_id(memo: EntryMemo, clock: FakeClock) -> None:
    put(memo, row(1), row(2))
    memo.check_integrity()
    memo._rows[1] = (clock(), row(2))
    with pytest.raises(AssertionError, match="key 1 holds row 2"):
        memo.check_integrity()


def test_integrity_detects_more_rows_than_the_bound(memo: EntryMemo) -> None:
    put(memo, row(1), row(2), row(3))
    memo.check_integrity()
    memo.size = 2
    with pytest.raises(AssertionError, match="3 rows kept, bound 2"):
        memo.check_integrity()


def test_integrity_detects_a_row_kept_in_the_future(memo: EntryMemo, clock: FakeClock) -> None:
    put(memo, row(1))
    memo.check_integrity()
    clock.t -= 1.0  # the put's time is now ahead of the clock
    with pytest.raises(AssertionError, match="row 1 kept in the future"):
        memo.check_integrity()


def test_stored_entry_compare_ignores_the_embedding() -> None:
    # The tests above compare rows with ==; make sure that says what they mean.
    assert row(1) == replace(row(1), embedding=np.zeros(4, dtype=np.float32))
    assert row(1) != row(1, answer="other")
