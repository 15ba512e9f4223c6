"""The per-tenant waiting share's bookkeeping, without torch or an engine thread."""

from __future__ import annotations

from prefix.core.sequence import Sequence, SequenceStatus
from prefix.serve.waiting_share import ShareEntry, WaitingShare


def _seq(request_id: str) -> Sequence:
    return Sequence([1, 2, 3], b"root", block_size=4, max_tokens=4, request_id=request_id)


def _submit(share: WaitingShare, tenant: str, request_id: str) -> tuple[ShareEntry, Sequence]:
    entry = ShareEntry(tenant)
    assert share.can_reserve(tenant)
    share.reserve(entry)
    seq = _seq(request_id)
    share.register(entry, seq)
    return entry, seq


def test_limit_is_per_tenant() -> None:
    share = WaitingShare(limit=2)
    _submit(share, "a", "r1")
    _submit(share, "a", "r2")
    assert not share.can_reserve("a")
    assert share.can_reserve("b")  # positive control: another tenant still gets in
    assert share.can_reserve("")  # anonymous requests have no share
    assert share.by_tenant() == {"a": 2}


def test_admission_gives_the_place_back_before_any_output() -> None:
    share = WaitingShare(limit=1)
    entry, seq = _submit(share, "a", "r1")
    share.after_step()
    assert share.by_tenant() == {"a": 1}  # still waiting: the step did not admit it
    seq.status = SequenceStatus.RUNNING  # admitted, prefill not finished, no output yet
    share.after_step()
    assert share.by_tenant() == {}
    assert share.can_reserve("a")
    assert not entry.started


def test_preemption_before_output_takes_a_place_again() -> None:
    share = WaitingShare(limit=1)
    _, seq = _submit(share, "a", "r1")
    seq.status = SequenceStatus.RUNNING
    share.after_step()
    seq.status = SequenceStatus.WAITING  # preempted back to the scheduler's queue
    share.after_step()
    assert share.by_tenant() == {"a": 1}
    assert not share.can_reserve("a")


def test_release_is_once_and_stops_watching() -> None:
    share = WaitingShare(limit=3)
    entry, seq = _submit(share, "a", "r1")
    share.release(entry)
    share.release(entry)  # a second release (reader left after the end) changes nothing
    assert share.by_tenant() == {}
    seq.status = SequenceStatus.WAITING
    share.after_step()  # a released entry is not watched: it never counts again
    assert share.by_tenant() == {}


def test_release_before_register_gives_the_reservation_back() -> None:
    share = WaitingShare(limit=1)
    entry = ShareEntry("a")
    share.reserve(entry)
    assert not share.can_reserve("a")
    share.release(entry)  # validation failed: never registered
    assert share.can_reserve("a")
    assert share.by_tenant() == {}
