"""One tenant's share of the engine's waiting queue (``max_num_waiting_per_tenant``).

A tenant's share counts what the global bound (``num_waiting``) counts: requests not
yet admitted. A place is reserved at submit, before validation, so a burst cannot all
get in; it is given back when the scheduler admits the request (a long prompt's
prefill takes several steps, and holding the place until the first output would refuse
a tenant of long prompts early), when the request ends, or when its reader leaves. A
request preempted back to the scheduler's queue before its first output takes a place
again. Requests without a tenant ("" anonymous) have no share.

Not thread-safe on its own: :class:`prefix.serve.async_engine.AsyncEngine` calls every
method under its streams lock, from the event loop and from the engine thread.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from prefix.core.sequence import Sequence, SequenceStatus

__all__ = ["ShareEntry", "WaitingShare"]


@dataclass
class ShareEntry:
    """One submitted request as its tenant's share sees it."""

    tenant: str = ""  # EngineRequest.tenant_key ("" anonymous: no per-tenant share)
    started: bool = False  # its first output came, it ended or its reader left
    counted: bool = True  # in its tenant's waiting share (reserved at submit)
    seq: Sequence | None = None  # set once registered; its status says when it is admitted


@dataclass
class WaitingShare:
    limit: int  # requests one tenant may have waiting (EngineConfig.waiting_per_tenant)
    _counts: Counter[str] = field(default_factory=Counter)
    # Registered entries with a tenant and no output yet: the only ones a step can move.
    _unstarted: dict[str, ShareEntry] = field(default_factory=dict)

    def can_reserve(self, tenant: str) -> bool:
        return not tenant or self._counts[tenant] < self.limit

    def reserve(self, entry: ShareEntry) -> None:
        """Take ``entry``'s place (checked with :meth:`can_reserve` first)."""
        if entry.tenant:
            self._counts[entry.tenant] += 1

    def register(self, entry: ShareEntry, seq: Sequence) -> None:
        """``entry`` now has its sequence: its admission can be watched."""
        entry.seq = seq
        if entry.tenant:
            self._unstarted[seq.request_id] = entry

    def release(self, entry: ShareEntry) -> None:
        """``entry`` waits no longer (its first output, its end, or its reader left);
        once per entry."""
        if not entry.started:
            entry.started = True
            if entry.seq is not None:
                self._unstarted.pop(entry.seq.request_id, None)
            self._uncount(entry)

    def after_step(self) -> None:
        """Move the places of the requests the step admitted or preempted. Only entries
        with no output yet are looked at (at most the waiting ones and the running ones
        still in their prefill)."""
        for entry in self._unstarted.values():
            seq = entry.seq
            if seq is None or not entry.tenant:
                continue
            if seq.status is not SequenceStatus.WAITING:
                self._uncount(entry)
            elif not entry.counted:
                entry.counted = True
                self._counts[entry.tenant] += 1

    def by_tenant(self) -> dict[str, int]:
        """Places in use per tenant (tenants with none are left out); a copy, taken
        under the owner's lock as every other call."""
        return dict(self._counts)

    def _uncount(self, entry: ShareEntry) -> None:
        if entry.counted:
            entry.counted = False
            if entry.tenant:
                self._counts[entry.tenant] -= 1
                if self._counts[entry.tenant] <= 0:
                    del self._counts[entry.tenant]
