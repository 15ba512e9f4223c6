"""Per-step recovery: a step that raises ends its own requests, not the engine.

A step that fails (a device error, an out-of-memory, a bug hit by one batch) used to
stop the engine thread for good. Now ``PrefixEngine.step`` hands the failure here:

- every request of the step that had not finished yet is ended with finish reason
  ``"error"`` (``AsyncEngine`` turns that into a ``StepFailedError`` on its stream,
  which servers answer with a 5xx), and its KV blocks are released;
- the prefix cache stays exact: a block is committed (given its key) only after the
  forward that computed it returned, so the blocks the failed step was writing are
  still unkeyed and go back to the pool as plain free blocks, never as cached
  prefixes; blocks committed by earlier steps (or by this one, after its forward
  completed) hold correct KV and stay cached;
- requests that were not in the step (waiting, or preempted by it) are untouched.

A fault that persists (a device gone bad fails every step) must still show as a
dead engine, or readiness would report a server that fails every request as
healthy: after ``MAX_CONSECUTIVE_STEP_FAILURES`` failed steps in a row the
exception is raised again, which stops the engine thread as before.

A failure inside ``Scheduler.schedule`` is not recovered: it means the bookkeeping
itself is broken (which blocks are whose), so nothing later could be trusted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from prefix.core.scheduler import SchedulerOutput

if TYPE_CHECKING:
    from prefix.serve.engine import PrefixEngine
    from prefix.serve.outputs import RequestOutput

log = logging.getLogger("cachegate.prefix")

# Failed steps in a row after which the engine gives up. Small: a healthy engine's
# steps do not fail, so three in a row is a fault that stays, and every failed step
# costs the requests in it.
MAX_CONSECUTIVE_STEP_FAILURES = 3


class StepFailures:
    """Counts failed steps and decides when recovering stops making sense."""

    def __init__(self, limit: int = MAX_CONSECUTIVE_STEP_FAILURES) -> None:
        if limit < 1:
            raise ValueError("the step failure limit must be >= 1")
        self.limit = limit
        self.total = 0  # every failed step (a counter for /metrics)
        self.consecutive = 0  # failed steps since the last one that ran the model

    def succeeded(self, plan: SchedulerOutput) -> None:
        # Only a step that ran the model shows the fault is gone; an empty step
        # (nothing could be scheduled) proves nothing.
        if not plan.is_empty:
            self.consecutive = 0

    def fail_step(
        self, engine: PrefixEngine, plan: SchedulerOutput, exc: Exception
    ) -> list[RequestOutput]:
        """End the step's unfinished requests (the caller holds the engine lock);
        their final outputs. Raises ``exc`` again once the failures are persistent."""
        self.total += 1
        self.consecutive += 1
        in_step = [s.request_id for s in plan.decode] + [c.seq.request_id for c in plan.prefill]
        ended = [out for rid in in_step if (out := engine.end_request(rid, "error")) is not None]
        # Request ids and counts only: the prompts and outputs are the users' text.
        log.error(
            "engine step failed (%d in a row, the limit is %d); %d of its %d requests "
            "ended with an error: %s",
            self.consecutive,
            self.limit,
            len(ended),
            len(in_step),
            " ".join(o.request_id for o in ended),
            exc_info=exc,
        )
        if self.consecutive >= self.limit:
            log.critical("%d engine steps failed in a row; the engine stops", self.consecutive)
            raise exc
        return ended
