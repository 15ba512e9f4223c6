"""The memo of decoded rows: LRU by id, bounded in age, and never stale across a write."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

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


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def memo(clock: FakeClock) -> EntryMemo:
    return EntryMemo(size=3, max_age=10.0, clock=clock)


def put(memo: EntryMemo, *rows: StoredEntry) -> bool:
    """Put with the current generation (nothing raced): always kept when enabled."""
    return memo.put(rows, memo.generation())


def kept_ids(memo: EntryMemo) -> list[int]:
    """The ids held, least recently used first."""
    return list(memo._rows)


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


# -- writes forget, and a raced read cannot put -----------------------------------------


def test_generation_moves_on_every_forget(memo: EntryMemo) -> None:
    seen = [memo.generation()]
    memo.forget([1])
    seen.append(memo.generation())
    memo.forget([])  # even nothing: the caller wrote something
    seen.append(memo.generation())
    memo.forget_partition(PART_A)
    seen.append(memo.generation())
    memo.clear()
    seen.append(memo.generation())
    assert seen == sorted(set(seen))  # strictly increasing
    memo.check_integrity()


def test_put_and_get_do_not_move_the_generation(memo: EntryMemo) -> None:
    before = memo.generation()
    put(memo, row(1))
    memo.get([1, 2], NOW)
    assert memo.generation() == before


def test_forget_drops_those_rows_only(memo: EntryMemo) -> None:
    put(memo, row(1), row(2), row(3))
    memo.forget([2, 99])  # an unknown id is ignored
    assert kept_ids(memo) == [1, 3]
    assert memo.get([1, 2, 3], NOW)[1] == [2]
    memo.check_integrity()


def test_a_put_after_a_forget_is_dropped(memo: EntryMemo) -> None:
    seen = memo.generation()  # a reader takes the generation, then reads row 1 (old)
    old = row(1, answer="old")
    memo.forget([1])  # meanwhile a writer commits row 1 and forgets it
    assert memo.put([old], seen) is False
    assert len(memo) == 0
    assert memo.get([1], NOW) == ({}, [1])
    memo.check_integrity()


def test_any_forget_since_the_read_drops_the_put(memo: EntryMemo) -> None:
    # The memo cannot tell which rows a write touched relative to the read: any
    # forget since the generation was taken drops the whole put.
    seen = memo.generation()
    memo.forget([42])
    assert memo.put([row(1)], seen) is False
    seen = memo.generation()
    memo.forget_partition(PART_B)
    assert memo.put([row(1)], seen) is False
    seen = memo.generation()
    memo.clear()
    assert memo.put([row(1)], seen) is False
    assert len(memo) == 0
    memo.check_integrity()


def test_a_dropped_put_leaves_the_rows_kept_before(memo: EntryMemo) -> None:
    kept = row(2)
    put(memo, kept)
    seen = memo.generation()
    memo.forget([1])
    assert memo.put([row(1), row(3)], seen) is False
    assert memo.get([1, 2, 3], NOW) == ({2: kept}, [1, 3])
    memo.check_integrity()


def test_a_put_with_the_current_generation_is_kept(memo: EntryMemo) -> None:
    memo.forget([1])
    seen = memo.generation()  # the read starts after the write's forget
    new = row(1, answer="new")
    assert memo.put([new], seen) is True
    assert memo.get([1], NOW) == ({1: new}, [])
    memo.check_integrity()


def test_a_put_with_a_future_generation_is_dropped(memo: EntryMemo) -> None:
    assert memo.put([row(1)], memo.generation() + 1) is False
    assert len(memo) == 0


def test_a_put_before_the_writers_forget_is_forgotten(memo: EntryMemo) -> None:
    # The reader read the old row before the commit and put it before the writer's
    # forget: the forget, which comes after the commit, removes it.
    seen = memo.generation()
    assert memo.put([row(1, answer="old")], seen) is True
    memo.forget([1])
    assert memo.get([1], NOW) == ({}, [1])
    memo.check_integrity()


def test_forget_partition_drops_that_partition_only(memo: EntryMemo) -> None:
    a1, b2, a3 = row(1), row(2, partition_key=PART_B), row(3)
    put(memo, a1, b2, a3)
    memo.forget_partition(PART_A)
    assert kept_ids(memo) == [2]
    assert memo.get([1, 2, 3], NOW) == ({2: b2}, [1, 3])
    memo.forget_partition("unknown")
    assert kept_ids(memo) == [2]
    memo.check_integrity()


def test_clear_drops_everything(memo: EntryMemo) -> None:
    put(memo, row(1), row(2, partition_key=PART_B))
    memo.clear()
    assert len(memo) == 0
    assert memo.get([1, 2], NOW) == ({}, [1, 2])
    assert put(memo, row(1)) is True  # usable afterwards
    memo.check_integrity()


def test_forget_accepts_any_iterable(memo: EntryMemo) -> None:
    put(memo, row(1), row(2), row(3))
    memo.forget(i for i in (1, 3))
    assert kept_ids(memo) == [2]
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


# -- threads ---------------------------------------------------------------------------


def test_concurrent_puts_gets_and_forgets_keep_the_memo_consistent() -> None:
    memo = EntryMemo(size=16, max_age=60.0)
    rows = [row(i, partition_key=PART_A if i % 2 else PART_B) for i in range(64)]
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def reader(offset: int) -> None:
        try:
            start.wait(timeout=5)
            for n in range(300):
                ids = [(offset + n + k) % 64 for k in range(4)]
                seen = memo.generation()
                found, missing = memo.get(ids, NOW)
                assert set(found) | set(missing) == set(ids)
                assert all(found[i] is rows[i] for i in found)
                memo.put([rows[i] for i in missing], seen)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def writer() -> None:
        try:
            start.wait(timeout=5)
            for n in range(300):
                memo.forget([n % 64])
                if n % 50 == 0:
                    memo.forget_partition(PART_B)
                memo.check_integrity()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(o,), daemon=True) for o in (0, 20, 40)]
    threads.append(threading.Thread(target=writer, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive()
    assert errors == []
    assert len(memo) <= 16
    memo.check_integrity()


def test_stored_entry_compare_ignores_the_embedding() -> None:
    # The tests above compare rows with ==; make sure that says what they mean.
    assert row(1) == replace(row(1), embedding=np.zeros(4, dtype=np.float32))
    assert row(1) != row(1, answer="other")
