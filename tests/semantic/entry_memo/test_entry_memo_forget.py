"""The memo of decoded rows is never stale across a write: every forget moves the
generation, a put from a read raced by a forget is dropped, and concurrent puts, gets
and forgets keep the memo consistent."""

from __future__ import annotations

import threading

from semantic.entry_memo import EntryMemo
from tests.semantic.entry_memo.support import NOW, PART_A, PART_B, kept_ids, put, row

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
    assert memo.forget([2, 99]) == [2]  # an unknown id is ignored; the kept are named
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
