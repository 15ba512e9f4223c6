"""The continuous-batching scheduler without a model (torch-free, milliseconds).

A tiny driver plays the engine: it marks scheduled chunks computed, commits full
blocks and appends a token whenever a chunk reaches the end of its sequence.
"""

from __future__ import annotations

from prefix.core.block_manager import BlockManager
from prefix.core.block_pool import BlockPool
from prefix.core.scheduler import Scheduler, SchedulerOutput
from prefix.core.sequence import Sequence, SequenceStatus
from prefix.lab.experiment import lab_root

B = 4


def make(num_blocks: int = 32, **kw: int) -> Scheduler:
    return Scheduler(BlockManager(BlockPool(num_blocks), B), **kw)


def seq(
    n: int,
    start: int = 0,
    max_tokens: int = 4,
    quota_key: str | None = None,
    kv_block_quota: int | None = None,
) -> Sequence:
    return Sequence(
        list(range(start, start + n)),
        lab_root(B, "t"),
        B,
        max_tokens,
        quota_key=quota_key,
        kv_block_quota=kv_block_quota,
    )


def run_step(s: Scheduler) -> SchedulerOutput:
    out = s.schedule()
    for q in out.decode:
        q.num_computed_tokens = q.num_tokens
    for c in out.prefill:
        c.seq.num_computed_tokens = c.end
    done = out.decode + [c.seq for c in out.prefill if c.end == c.seq.num_tokens]
    for q in done:
        s.blocks.commit_full_blocks(q)
        q.output_token_ids.append(7)
        if len(q.output_token_ids) >= q.max_tokens:
            s.finish(q, "length")
    s.blocks.pool.check_integrity()
    return out


def drain(s: Scheduler, limit: int = 500) -> int:
    steps = 0
    while s.has_unfinished():
        run_step(s)
        steps += 1
        assert steps < limit, "scheduler did not make progress"
    assert s.blocks.pool.num_used_blocks == 0
    return steps


def test_prefill_chunks_end_on_block_boundaries_and_decodes_batch() -> None:
    s = make(max_num_batched_tokens=10, chunk_size=10)
    a = seq(23)
    s.add(a)
    first = run_step(s)
    assert [(c.start, c.end) for c in first.prefill] == [(0, 8)]  # 10 rounded down to a block
    b = seq(5, start=100)
    s.add(b)
    run_step(s)
    assert a.num_computed_tokens == 16
    drain(s)
    assert a.is_finished and b.is_finished


def test_all_running_sequences_decode_in_one_step() -> None:
    s = make()
    seqs = [seq(3 + i, start=50 * i) for i in range(4)]
    for q in seqs:
        s.add(q)
    run_step(s)  # admits and prefills all four
    out = run_step(s)
    assert set(map(id, out.decode)) == set(map(id, seqs)) and not out.prefill


def test_admission_waits_then_preemption_keeps_progress() -> None:
    s = make(num_blocks=6)
    a, b = seq(7, max_tokens=8), seq(7, start=100, max_tokens=8)
    s.add(a)
    s.add(b)
    drain(s)
    assert s.num_preemptions > 0
    assert a.finish_reason == b.finish_reason == "length"
    assert len(a.output_token_ids) == len(b.output_token_ids) == 8


def test_abort_releases_blocks_at_once() -> None:
    s = make()
    a = seq(10)
    s.add(a)
    run_step(s)
    assert s.blocks.pool.num_used_blocks > 0
    assert s.abort(a.request_id) is a
    assert a.status is SequenceStatus.FINISHED and a.finish_reason == "abort"
    assert s.blocks.pool.num_used_blocks == 0 and not s.has_unfinished()


def test_tenant_quota_limits_its_own_requests_but_not_others() -> None:
    s = make(num_blocks=40)
    a1 = seq(10, max_tokens=4, quota_key="tenant-a", kv_block_quota=5)
    a2 = seq(10, start=200, max_tokens=4, quota_key="tenant-a", kv_block_quota=5)
    other = seq(10, start=400, max_tokens=4)
    for q in (a1, a2, other):
        s.add(q)
    run_step(s)
    # a1 (3 blocks) fits; a2 would bring tenant-a to 6 > 5 and waits; other is admitted
    assert a1.status is SequenceStatus.RUNNING and other.status is SequenceStatus.RUNNING
    assert a2.status is SequenceStatus.WAITING
    held = sum(len(q.block_table) for q in s.running if q.quota_key == "tenant-a")
    assert held <= 5
    drain(s)
    assert all(q.finish_reason == "length" for q in (a1, a2, other))


def test_quota_growth_preempts_the_tenants_newest_request() -> None:
    s = make(num_blocks=40)
    a1 = seq(8, max_tokens=6, quota_key="t", kv_block_quota=6)
    a2 = seq(8, start=300, max_tokens=6, quota_key="t", kv_block_quota=6)
    s.add(a1)
    s.add(a2)
    max_held = 0
    while s.has_unfinished():
        run_step(s)
        max_held = max(max_held, sum(len(q.block_table) for q in s.running))
    assert max_held <= 6
    assert s.num_preemptions > 0
    assert len(a1.output_token_ids) == len(a2.output_token_ids) == 6


def test_a_large_request_at_its_quota_is_not_overtaken_by_its_tenants_smaller_ones() -> None:
    """Quota 8 blocks; the tenant keeps two small requests (2 blocks each, 8 tokens to
    generate) going, and a large one (7 blocks to start) arrives. The small ones that
    kept arriving fitted beside the running ones and went ahead, so the large one
    waited forever (a review: 300 steps, 74 newer requests served, 123 blocks free).
    Now the tenant's requests wait in order behind it; another tenant's still go."""

    def keep_two_small(s: Scheduler, start: list[int]) -> None:
        mine = [q for q in [*s.running, *s.waiting] if q.num_prompt_tokens == 4]
        while len(mine) < 2:
            q = seq(4, start=start[0], max_tokens=8, quota_key="a", kv_block_quota=8)
            start[0] += 100
            s.add(q)
            mine.append(q)

    s = make(num_blocks=128, max_num_seqs=16, max_num_seqs_per_tenant=16)
    start = [2000]
    s.add(seq(4, start=100, max_tokens=8, quota_key="a", kv_block_quota=8))
    for _ in range(5):  # staggered: the two small ones never finish in the same step
        run_step(s)
    keep_two_small(s, start)
    for _ in range(2):
        run_step(s)
    large = seq(28, start=0, max_tokens=4, quota_key="a", kv_block_quota=8)
    s.add(large)
    other = seq(8, start=9000, max_tokens=2, quota_key="b", kv_block_quota=8)
    s.add(other)
    for _ in range(100):
        keep_two_small(s, start)
        run_step(s)
        if large.status is not SequenceStatus.WAITING:
            break
    assert large.status is not SequenceStatus.WAITING
    assert other.finish_reason == "length"  # the control: another tenant went meanwhile


def test_tenants_seen_once_do_not_pile_up() -> None:
    """One admission tick per tenant ever seen: a review counted one entry per request
    where each request was a tenant of its own. Idle ones are dropped past a bound."""
    s = make(num_blocks=64)
    for i in range(3000):
        s.add(tenant_seq(f"once-{i}", 4, start=10 * i, max_tokens=1))
        run_step(s)
    assert len(s._served) <= 4 * (len(s.running) + len(s.waiting)) + 1024 + 1
    drain(s)


# ---- fairness across tenants ------------------------------------------------------------


def tenant_seq(tenant: str, n: int, start: int, max_tokens: int = 4) -> Sequence:
    s = seq(n, start=start, max_tokens=max_tokens)
    s.tenant_key = tenant
    return s


def test_admission_is_round_robin_across_tenants() -> None:
    # Tenant a floods the queue before b and c arrive; with room for three, the first
    # step admits one request of each tenant, not three of a's.
    s = make(num_blocks=64, max_num_seqs=3)
    flood = [tenant_seq("a", 4, start=100 * i) for i in range(6)]
    for q in flood:
        s.add(q)
    b, c = tenant_seq("b", 4, start=1000), tenant_seq("c", 4, start=2000)
    s.add(b)
    s.add(c)
    run_step(s)
    assert {q.tenant_key for q in s.running} == {"a", "b", "c"}
    assert s.running[0] is flood[0]  # within a tenant: oldest first
    drain(s)


def test_without_other_tenants_admission_stays_fcfs() -> None:
    # Positive control: one tenant alone is admitted in arrival order, as before.
    s = make(num_blocks=64, max_num_seqs=3)
    flood = [tenant_seq("a", 4, start=100 * i) for i in range(5)]
    for q in flood:
        s.add(q)
    run_step(s)
    assert s.running == flood[:3]
    drain(s)


def test_least_recently_served_tenant_goes_first() -> None:
    s = make(num_blocks=64, max_num_seqs=1)
    s.add(tenant_seq("a", 4, start=0, max_tokens=1))
    s.add(tenant_seq("a", 4, start=100, max_tokens=1))
    s.add(tenant_seq("b", 4, start=200, max_tokens=1))
    order: list[str] = []
    while s.has_unfinished():
        out = run_step(s)
        order += [c.seq.tenant_key for c in out.prefill]
    assert order == ["a", "b", "a"]  # b waited less behind a's second request


def test_per_tenant_running_cap_leaves_room_for_others() -> None:
    s = make(num_blocks=64, max_num_seqs=4, max_num_seqs_per_tenant=2)
    for i in range(6):
        s.add(tenant_seq("a", 4, start=100 * i, max_tokens=8))
    run_step(s)
    assert len(s.running) == 2  # a is capped although two slots are free
    s.add(tenant_seq("b", 4, start=1000, max_tokens=8))
    run_step(s)
    assert sorted(q.tenant_key for q in s.running) == ["a", "a", "b"]
    drain(s)


def test_one_tenants_prefills_do_not_take_the_whole_budget() -> None:
    # a's two long prompts arrived first; b's prompt still gets a chunk in the same step.
    s = make(num_blocks=256, max_num_batched_tokens=64, chunk_size=32)
    s.add(tenant_seq("a", 200, start=0))
    s.add(tenant_seq("a", 200, start=1000))
    s.add(tenant_seq("b", 40, start=5000))
    run_step(s)  # admits a, a, b
    out = run_step(s)
    assert "b" in {c.seq.tenant_key for c in out.prefill}
    drain(s)


def test_a_victim_preempted_after_being_placed_leaves_the_step() -> None:
    # Decodes are placed first; if an older prefill then needs the newest sequence's
    # blocks, the victim must not stay in this step's batch.
    s = make(num_blocks=7, max_num_batched_tokens=64, chunk_size=8)
    old = tenant_seq("a", 20, start=0, max_tokens=2)
    new = tenant_seq("b", 3, start=500, max_tokens=6)
    s.add(old)
    s.add(new)
    for _ in range(60):
        if not s.has_unfinished():
            break
        out = run_step(s)
        for victim in out.preempted:
            assert victim not in out.decode
            assert all(c.seq is not victim for c in out.prefill)
    assert s.num_preemptions > 0  # the situation under test did happen
    assert not s.has_unfinished()


# ---- prefill priority for under-served tenants ------------------------------------------


def test_a_sequence_whose_kv_nothing_can_reuse_is_neither_matched_nor_kept() -> None:
    # cache_kv=False (an anonymous end user's own namespace): its blocks go back to the
    # free list instead of displacing reusable ones, and its keys are looked up nowhere.
    looked_up: list[bytes] = []
    committed: list[bytes] = []

    class Tier:
        def load_chain(self, keys: list[bytes], block_ids: list[int]) -> int:
            looked_up.extend(keys)
            return 0

        def on_commit(self, key: bytes, block_id: int) -> None:
            committed.append(key)

        def on_hit(self, keys: list[bytes]) -> None:
            looked_up.extend(keys)

    s = Scheduler(BlockManager(BlockPool(32), B, lower_tier=Tier()))
    kept = seq(12)
    s.add(kept)
    drain(s)
    cached, written, asked = s.blocks.pool.num_cached_blocks, len(committed), len(looked_up)
    assert cached == 3 and written == 3 and asked > 0  # positive control: kept, asked
    private = seq(12)
    private.cache_kv = False  # the same tokens under the same root: would hit all 3
    s.add(private)
    run_step(s)
    assert private.num_cached_tokens == 0  # not matched
    drain(s)
    fresh = seq(8, start=100)  # keys nothing holds: the tier is not asked either
    fresh.cache_kv = False
    s.add(fresh)
    drain(s)
    assert s.blocks.pool.num_cached_blocks == cached  # nothing of theirs kept
    assert len(committed) == written and len(looked_up) == asked
    again = seq(12)  # and what was kept is still there for everyone else
    s.add(again)
    run_step(s)
    assert again.num_cached_tokens == 8  # 3 blocks, the last recomputed for its logits
    drain(s)
