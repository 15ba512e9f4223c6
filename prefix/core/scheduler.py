"""Continuous-batching scheduler (torch-free).

Every step each running sequence gets a chunk of its uncomputed tokens: one
token for a decoding sequence, a block-aligned slice of the prompt for one
still prefilling. Decodes are served first, then prefill chunks round-robin
across tenants, so one tenant's long prompts cannot take a step's whole token
budget. Waiting sequences are admitted through the ``BlockManager`` (match →
check → pin + allocate, all or nothing): preempted ones first, then round-robin
across tenants with waiting requests (least recently served tenant first, each
tenant's oldest request first), each tenant holding at most
``max_num_seqs_per_tenant`` running sequences; one that does not fit waits.
When a running sequence needs a block and none is reclaimable, the newest
running sequence is preempted: its blocks are released (they stay cached by
key) and it goes back to the front of the queue, to be recomputed later,
mostly from its own cached prefix (seed 000: wait_or_preempt).

Prefill priority for under-served tenants: a tenant none of whose running
sequences is decoding (it has none, or they are all still prefilling) while
another tenant decodes is under-served. When one has work to start, the next
step holds only the under-served tenants' prefill chunks and admissions — no
other tenant's decodes or prefills — so its first token is not stuck behind a
batch of another tenant's decodes (bench/fairness.py: B's TTFT under A's flood
5.0x → 3.3x of unloaded on a busy 2-core box, 1.9x on a quieter one; README).
Starvation-free: never two such steps in a row, so every decoding sequence
still gets a token at least every other step; none while preempted sequences
wait for memory (they come first; one waiting for its own tenant's quota or cap
does not count); and an empty priority plan (its
request does not fit) falls back to a normal step at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import count, zip_longest

from prefix.core.block_manager import BlockManager
from prefix.core.sequence import Sequence, SequenceStatus


@dataclass(frozen=True)
class ScheduledChunk:
    seq: Sequence
    start: int
    end: int

    @property
    def reaches_end(self) -> bool:
        """The chunk computes the sequence's last token, so a new token is sampled after it."""
        return self.end == self.seq.num_tokens


@dataclass
class SchedulerOutput:
    decode: list[Sequence] = field(default_factory=list)  # one token each, batched
    prefill: list[ScheduledChunk] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)
    finished: list[Sequence] = field(default_factory=list)  # could never fit: "length"

    @property
    def is_empty(self) -> bool:
        return not self.decode and not self.prefill

    @property
    def num_tokens(self) -> int:
        return len(self.decode) + sum(c.end - c.start for c in self.prefill)


class Scheduler:
    def __init__(
        self,
        blocks: BlockManager,
        max_num_seqs: int = 64,
        max_num_batched_tokens: int = 1024,
        chunk_size: int = 512,
        max_num_seqs_per_tenant: int | None = None,
    ) -> None:
        if max_num_seqs < 1 or max_num_batched_tokens < 1 or chunk_size < 1:
            raise ValueError("scheduler limits must be >= 1")
        if max_num_seqs_per_tenant is not None and max_num_seqs_per_tenant < 1:
            raise ValueError("max_num_seqs_per_tenant must be >= 1")
        self.blocks = blocks
        self.block_size = blocks.block_size
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.chunk_size = chunk_size
        self.max_num_seqs_per_tenant = max_num_seqs_per_tenant
        self.waiting: deque[Sequence] = deque()
        self._served: dict[str, int] = {}  # tenant → tick of its last admission
        self._tick = count(1)
        self.running: list[Sequence] = []  # oldest first
        self.num_preemptions = 0
        self.num_priority_steps = 0
        self._prioritized = False  # the last step was a prefill-priority step

    # ---- queue management -----------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def abort(self, request_id: str) -> Sequence | None:
        """Drop a request wherever it is; its blocks are released at once."""
        for seq in self.running:
            if seq.request_id == request_id:
                self.finish(seq, "abort")
                return seq
        for seq in self.waiting:
            if seq.request_id == request_id:
                self.waiting.remove(seq)
                seq.status, seq.finish_reason = SequenceStatus.FINISHED, "abort"
                return seq
        return None

    def finish(self, seq: Sequence, reason: str) -> None:
        if seq in self.running:
            self.running.remove(seq)
        self.blocks.release(seq)
        seq.status, seq.finish_reason = SequenceStatus.FINISHED, reason

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.running)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # ---- one step -------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        urgent: set[str] = set() if self._prioritized else self._underserved_tenants()
        if urgent:
            out = self._plan(urgent)
            if out.decode or out.prefill or out.preempted or out.finished:
                self._prioritized = True
                self.num_priority_steps += 1
                return out
        self._prioritized = False
        return self._plan(None)

    def _plan(self, only: set[str] | None) -> SchedulerOutput:
        """One step's work; ``only``: restricted to these tenants (a priority step)."""
        out = SchedulerOutput()
        budget = self.max_num_batched_tokens
        for seq in self._fair_running_order():
            if budget <= 0:
                break
            if seq.status is not SequenceStatus.RUNNING:  # preempted earlier in this loop
                continue
            if only is not None and seq.tenant_key not in only:
                continue
            end = self._chunk_end(seq, budget)
            if not self._fit_quota(seq, end, out):
                continue  # seq itself was preempted to stay within its tenant's quota
            if not self._grow_or_preempt(seq, end, out):
                continue  # seq itself was preempted
            budget -= self._place(seq, end, out)
        # Admit only when nothing had to be preempted: admitting now would just evict again.
        if out.preempted:
            return out
        at_quota: set[str] = set()  # quota keys whose oldest waiting request must wait
        for seq in self._admission_order():
            if budget <= 0 or len(self.running) >= self.max_num_seqs:
                break
            if only is not None and seq.tenant_key not in only:
                continue
            if self._at_tenant_limit(seq):
                continue  # its tenant runs enough already; others may still go ahead
            if seq.quota_key in at_quota:
                continue  # behind its tenant's request that waits for quota: in order
            if self._over_quota(seq, seq.num_blocks_for(seq.num_tokens)):
                # Its tenant's newer, smaller requests must not go ahead of it: they kept
                # the quota busy and this one waited forever (a review: 300 steps, 74
                # newer requests served, 123 blocks free). Other tenants still may.
                if seq.quota_key is not None:
                    at_quota.add(seq.quota_key)
                continue
            if not self.blocks.admit(seq):
                break  # not enough blocks: the rest waits until blocks are released
            self.waiting.remove(seq)
            self.running.append(seq)
            self._served[seq.tenant_key] = next(self._tick)
            budget -= self._place(seq, self._chunk_end(seq, budget), out)
        self._forget_idle_tenants()
        return out

    def _forget_idle_tenants(self) -> None:
        """Drop the admission ticks of tenants with nothing waiting or running once they
        far outnumber those that have some (a review: one entry per tenant ever seen,
        one per request where every request was a tenant of its own). A tenant dropped
        counts as never served: it goes first when it comes back, as a new one would."""
        if len(self._served) <= 4 * (len(self.running) + len(self.waiting)) + 1024:
            return
        active = {s.tenant_key for s in self.running} | {s.tenant_key for s in self.waiting}
        self._served = {t: tick for t, tick in self._served.items() if t in active}

    # ---- fairness across tenants ---------------------------------------------------
    def _admission_order(self) -> list[Sequence]:
        """Preempted sequences first, then one request per tenant per round."""
        preempted = [s for s in self.waiting if s.num_preemptions]
        queues: dict[str, list[Sequence]] = {}
        for seq in self.waiting:
            if not seq.num_preemptions:
                queues.setdefault(seq.tenant_key, []).append(seq)
        tenants = sorted(queues, key=lambda t: self._served.get(t, 0))  # stable: arrival order
        return preempted + _interleave(queues[t] for t in tenants)

    def _fair_running_order(self) -> list[Sequence]:
        """Decodes first (one token each), then prefill chunks round-robin by tenant."""
        decoding = [s for s in self.running if _is_decoding(s)]
        queues: dict[str, list[Sequence]] = {}
        for seq in self.running:
            if not _is_decoding(seq):
                queues.setdefault(seq.tenant_key, []).append(seq)
        return decoding + _interleave(queues.values())

    def _underserved_tenants(self) -> set[str]:
        """Tenants with work to start and nothing decoding, while another tenant decodes.

        Empty when a priority step would change nothing (no decodes to hold back) or
        while preempted sequences wait for memory: they are readmitted first, in normal
        steps. One that waits for its own tenant's share (its KV quota, its running
        cap) is no memory pressure, and no step of any kind admits it sooner: before,
        it stopped every tenant's priority steps for as long as it waited.
        """
        decoding = {s.tenant_key for s in self.running if _is_decoding(s)}
        if not decoding or any(
            s.num_preemptions and not self._waits_for_own_share(s) for s in self.waiting
        ):
            return set()
        pending = {s.tenant_key for s in self.waiting}
        pending.update(s.tenant_key for s in self.running if not _is_decoding(s))
        return pending - decoding

    def _waits_for_own_share(self, seq: Sequence) -> bool:
        """``seq`` cannot be admitted until its own tenant's running requests finish."""
        needed = seq.num_blocks_for(seq.num_tokens)
        return self._at_tenant_limit(seq) or self._over_quota(seq, needed)

    def _at_tenant_limit(self, seq: Sequence) -> bool:
        limit = self.max_num_seqs_per_tenant
        if limit is None or not seq.tenant_key:  # anonymous requests are nobody's tenant
            return False
        return sum(1 for s in self.running if s.tenant_key == seq.tenant_key) >= limit

    # ---- per-tenant KV quota --------------------------------------------------------
    def _held(self, key: str) -> int:
        return sum(len(s.block_table) for s in self.running if s.quota_key == key)

    def _over_quota(self, seq: Sequence, new_blocks: int) -> bool:
        if seq.quota_key is None or seq.kv_block_quota is None:
            return False
        return self._held(seq.quota_key) + new_blocks > seq.kv_block_quota

    def _fit_quota(self, seq: Sequence, end: int, out: SchedulerOutput) -> bool:
        """Preempt the tenant's newest sequences until ``seq`` may grow to ``end`` tokens.

        A single sequence never exceeds its quota alone (the engine refuses such a
        request up front), so this always terminates.
        """
        while self._over_quota(seq, self.blocks.num_blocks_to_grow(seq, end)):
            victim = next(s for s in reversed(self.running) if s.quota_key == seq.quota_key)
            self._preempt(victim, out)
            if victim is seq:
                return False
        return True

    def _chunk_end(self, seq: Sequence, budget: int) -> int:
        start = seq.num_computed_tokens
        take = min(seq.num_tokens - start, budget, self.chunk_size)
        end = start + take
        if end < seq.num_tokens:
            # A non-final chunk ends on a block boundary, so each chunk commits full blocks.
            aligned = end // self.block_size * self.block_size
            if aligned > start:
                end = aligned
        return end

    def _grow_or_preempt(self, seq: Sequence, end: int, out: SchedulerOutput) -> bool:
        while not self.blocks.grow(seq, end):
            if self.running == [seq]:
                # Alone and still short: the pool itself is too small for this length.
                self.finish(seq, "length")
                out.finished.append(seq)
                return False
            victim = self.running[-1]
            self._preempt(victim, out)
            if victim is seq:
                return False
        return True

    def _preempt(self, seq: Sequence, out: SchedulerOutput) -> None:
        # Decodes are placed before prefills, so the victim may already be in this step.
        if seq in out.decode:
            out.decode.remove(seq)
        out.prefill = [c for c in out.prefill if c.seq is not seq]
        self.running.remove(seq)
        self.blocks.release(seq)
        seq.status = SequenceStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)
        out.preempted.append(seq)

    def _place(self, seq: Sequence, end: int, out: SchedulerOutput) -> int:
        start = seq.num_computed_tokens
        if end - start == 1 and end == seq.num_tokens:
            out.decode.append(seq)
        else:
            out.prefill.append(ScheduledChunk(seq, start, end))
        return end - start


def _is_decoding(seq: Sequence) -> bool:
    """One token left to compute: the sequence produces a token per step."""
    return seq.num_tokens - seq.num_computed_tokens <= 1


def _interleave(queues: Iterable[list[Sequence]]) -> list[Sequence]:
    """[a1, a2], [b1] → [a1, b1, a2]: one from each queue per round, in queue order."""
    return [seq for round_ in zip_longest(*queues) for seq in round_ if seq is not None]
