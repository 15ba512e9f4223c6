"""Prefill-priority steps for under-served tenants (prefix/core/scheduler.py): a
tenant with nothing decoding gets a step of its own for its prefill, never two in a
row, none while a request preempted for memory waits."""

from __future__ import annotations

from itertools import pairwise

from prefix.core.scheduler import Scheduler
from prefix.core.sequence import Sequence, SequenceStatus
from tests.prefix.core.test_scheduler import drain, make, run_step, seq, tenant_seq


def decoding_flood(s: Scheduler, n: int, max_tokens: int) -> list[Sequence]:
    """Tenant a's ``n`` requests, admitted and prefilled: from the next step they decode."""
    flood = [tenant_seq("a", 4, start=100 * i, max_tokens=max_tokens) for i in range(n)]
    for q in flood:
        s.add(q)
    run_step(s)
    assert s.running == flood
    return flood


def test_an_underserved_tenant_is_prefilled_without_the_other_tenants_decodes() -> None:
    # a decodes a full batch (its cap); b's request comes next in a step of its own, so
    # b's first token does not wait for a's 16 decodes; a decodes again the step after.
    s = make(num_blocks=128, max_num_seqs=32, max_num_seqs_per_tenant=16)
    flood = decoding_flood(s, 16, max_tokens=8)
    assert len(run_step(s).decode) == 16  # positive control: the full decode batch
    b = tenant_seq("b", 10, start=5000, max_tokens=3)
    s.add(b)
    out = run_step(s)
    assert [c.seq for c in out.prefill] == [b] and not out.decode
    assert len(b.output_token_ids) == 1  # its first token came from that short step
    after = run_step(s)
    assert set(map(id, after.decode)) == set(map(id, [*flood, b]))  # one step held back only
    assert s.num_priority_steps == 1
    drain(s)
    assert all(len(q.output_token_ids) == 8 for q in flood)


def test_a_stream_of_new_tenants_does_not_starve_the_decodes() -> None:
    # A new tenant arrives every step: at most every other step is a priority step, so
    # a's sequences still get a token at least every second step.
    s = make(num_blocks=256, max_num_seqs=64)
    flood = decoding_flood(s, 4, max_tokens=12)
    with_a = []
    for i in range(10):
        s.add(tenant_seq(f"t{i}", 6, start=1000 * (i + 1), max_tokens=2))
        out = run_step(s)
        with_a.append(any(q in flood for q in out.decode))
    assert not any(not x and not y for x, y in pairwise(with_a))
    assert s.num_priority_steps >= 4  # the newcomers did get priority steps
    assert all(len(q.output_token_ids) >= 1 + 5 for q in flood)
    drain(s)


def test_an_underserved_request_that_does_not_fit_leaves_a_normal_step() -> None:
    # No room for b (a runs max_num_seqs): the priority plan is empty, so the step is a
    # normal one (a decodes) rather than an empty one.
    s = make(num_blocks=64, max_num_seqs=4)
    flood = decoding_flood(s, 4, max_tokens=6)
    b = tenant_seq("b", 4, start=5000, max_tokens=2)
    s.add(b)
    out = run_step(s)
    assert set(map(id, out.decode)) == set(map(id, flood)) and b in s.waiting
    drain(s)
    assert b.finish_reason == "length"


def test_one_tenant_alone_never_takes_priority_over_its_own_decodes() -> None:
    # Positive control: a's later requests are admitted beside its decodes, as before.
    s = make(num_blocks=128, max_num_seqs=4)
    for i in range(10):
        s.add(tenant_seq("a", 6, start=100 * i, max_tokens=5))
    drain(s)
    assert s.num_priority_steps == 0


def test_priority_steps_keep_preemption_and_block_accounting() -> None:
    # b's long prompt is prefilled in priority steps while a's sequences grow; the pool
    # runs out, someone is preempted, and every step still passes check_integrity().
    s = make(num_blocks=12, max_num_batched_tokens=12, chunk_size=8)
    flood = decoding_flood(s, 3, max_tokens=16)
    b = tenant_seq("b", 24, start=5000, max_tokens=3)
    s.add(b)
    drain(s)  # run_step checks the pool's integrity after every step
    assert s.num_priority_steps > 0 and s.num_preemptions > 0
    assert all(len(q.output_token_ids) == q.max_tokens for q in [*flood, b])


def test_a_request_preempted_for_its_own_quota_does_not_stop_priority_steps() -> None:
    # a2 was preempted to keep tenant a within its quota and waits for a1 to finish: no
    # memory pressure, so tenant b's first request still gets its priority step.
    s = make(num_blocks=128, max_num_seqs=32, max_num_seqs_per_tenant=16)
    a1 = seq(8, max_tokens=12, quota_key="a", kv_block_quota=6)
    a2 = seq(8, start=300, max_tokens=12, quota_key="a", kv_block_quota=6)
    for q in (a1, a2):
        q.tenant_key = "a"
        s.add(q)
    while not a2.num_preemptions:
        run_step(s)
    assert a2.status is SequenceStatus.WAITING and a1.status is SequenceStatus.RUNNING
    b = tenant_seq("b", 10, start=5000, max_tokens=3)
    s.add(b)
    out = run_step(s)
    assert [c.seq for c in out.prefill] == [b] and not out.decode
    assert s.num_priority_steps == 1
    drain(s)
    assert len(a1.output_token_ids) == len(a2.output_token_ids) == 12


def test_a_request_preempted_for_memory_still_stops_priority_steps() -> None:
    # control: a2 preempted because the pool ran out waits first, in normal steps
    s = make(num_blocks=6, max_num_seqs=32, max_num_seqs_per_tenant=16)
    a1 = tenant_seq("a", 8, start=0, max_tokens=12)
    a2 = tenant_seq("a", 8, start=300, max_tokens=12)
    for q in (a1, a2):
        s.add(q)
    while not a2.num_preemptions:
        run_step(s)
    b = tenant_seq("b", 2, start=5000, max_tokens=3)
    s.add(b)
    run_step(s)
    assert s.num_priority_steps == 0
    drain(s)
