"""The memo of decoded rows is bounded in age: a row is trusted for ``max_age``
seconds of the injected clock from its put, and an expired row is never returned."""

from __future__ import annotations

from datetime import timedelta

from semantic.entry_memo import EntryMemo
from tests.semantic.entry_memo.support import NOW, FakeClock, put, row

# -- age and expiry --------------------------------------------------------------------


def test_a_row_is_trusted_for_max_age_seconds(memo: EntryMemo, clock: FakeClock) -> None:
    one = row(1)
    put(memo, one)
    clock.advance(10.0)  # exactly max_age: still trusted
    assert memo.get([1], NOW) == ({1: one}, [])
    clock.advance(0.001)
    assert memo.get([1], NOW) == ({}, [1])
    memo.check_integrity()


def test_a_hit_does_not_extend_the_age(memo: EntryMemo, clock: FakeClock) -> None:
    put(memo, row(1))
    clock.advance(6.0)
    assert memo.get([1], NOW)[1] == []
    clock.advance(6.0)  # 12 s since the put, 6 s since the hit
    assert memo.get([1], NOW)[1] == [1]
    memo.check_integrity()


def test_age_counts_from_each_put(memo: EntryMemo, clock: FakeClock) -> None:
    put(memo, row(1))
    clock.advance(8.0)
    put(memo, row(2))
    clock.advance(5.0)  # 1 is 13 s old, 2 is 5 s old
    found, missing = memo.get([1, 2], NOW)
    assert list(found) == [2] and missing == [1]
    put(memo, row(1))  # read again: trusted afresh
    assert memo.get([1], NOW)[1] == []
    memo.check_integrity()


def test_the_age_uses_the_injected_clock_not_the_wall_clock(clock: FakeClock) -> None:
    memo = EntryMemo(size=3, max_age=0.001, clock=clock)
    put(memo, row(1))
    assert memo.get([1], NOW)[1] == []  # the fake clock has not moved
    clock.advance(0.002)
    assert memo.get([1], NOW)[1] == [1]
    memo.check_integrity()


def test_an_expired_row_is_never_returned(memo: EntryMemo) -> None:
    put(memo, row(1, expires_at=NOW), row(2, expires_at=NOW + timedelta(seconds=1)))
    found, missing = memo.get([1, 2], NOW)  # expires_at == now is expired
    assert list(found) == [2] and missing == [1]
    found, missing = memo.get([1, 2], NOW + timedelta(seconds=1))
    assert found == {} and missing == [1, 2]
    memo.check_integrity()


def test_a_row_that_never_expires_is_returned_at_any_time(memo: EntryMemo) -> None:
    forever = row(1, expires_at=None)
    put(memo, forever)
    assert memo.get([1], NOW + timedelta(days=3650)) == ({1: forever}, [])
    memo.check_integrity()


def test_an_expired_row_is_read_again_and_a_slid_expiry_replaces_it(memo: EntryMemo) -> None:
    put(memo, row(1, expires_at=NOW - timedelta(seconds=1)))
    assert memo.get([1], NOW) == ({}, [1])
    # Another replica slid the expiry: the row read again replaces the memo's.
    slid = row(1, expires_at=NOW + timedelta(hours=1))
    assert put(memo, slid) is True
    assert memo.get([1], NOW) == ({1: slid}, [])
    assert len(memo) == 1
    memo.check_integrity()
