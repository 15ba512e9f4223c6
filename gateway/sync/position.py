"""Where the replica-sync feed is in the change log, and which rows below it may still come.

Sequence numbers are handed out at insert, but transactions commit in any order, so
a row with a smaller seq can become visible after the feed has read past it. The
rule for such a late row is the feed's: it is replayed if it was written (``at``)
no earlier than ``window`` before the previous good poll's clock (``ref``), and
given up otherwise. Re-reading every row of that window on every poll found them,
but read each row again on every poll for ``window`` seconds (at 87 writes/s with a
wake-up per write, ~870 rows a poll for ~1 new one). So the feed remembers the
*gaps* instead: the seqs at or below its position that were missing when the
position passed them (a transaction still open, or rolled back, or one the sequence
skipped). A poll reads the rows past the position and the rows of the open gaps
that pass the rule, nothing else.

A gap is given up once no row with its seq can pass the rule any more. A row's
``at`` is the database clock just before its insert, which takes its seq, and the
sequence hands out increasing numbers, so a seq missing below a row that a poll
read belongs to an insert that came before that read: its ``at`` is before the
clock the *next* poll reads first. That clock is the gap's bound (``None`` until
then); once ``ref - window`` is past the bound, the row is too late whenever it
commits, exactly as the window would have had it.

Where the gaps are not known (after :meth:`Position.reset`: a start, a resume from a
snapshot's position, a rebuild), the seqs at or below that position, the *floor*,
are read the old way, every row of the window minus those already applied, until no
row at or below the floor can pass the rule (its bound, as for a gap: about one
window later).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from semantic.changes import Change

#: More seqs missing in one read than this is a jump in the sequence (``setval``, a
#: snapshot's position behind a gap of pruned rows), not transactions still open:
#: rather than remember each one, the window below the new position is read whole
#: again (a floor). Rows replayed twice that way are harmless (replay is idempotent).
MAX_NEW_GAPS = 100_000


@dataclass(frozen=True)
class Plan:
    """What one poll reads besides the rows past the position."""

    since: datetime  # late rows written before this are given up
    floor: int | None  # read every row at or below this written since ``since``
    gaps: list[int]  # and the rows of these seqs written since ``since``


class Position:
    """The feed's position (``seq``, ``ref``) and what may still arrive below it.
    Not thread-safe: the feed calls it under its poll lock."""

    def __init__(self) -> None:
        self.seq = 0  # every row up to here is applied, given up, or a gap
        self.ref: datetime | None = None  # the database clock at the last good poll
        self._gaps: dict[int, datetime | None] = {}  # seq -> bound on its row's ``at``
        self._floor: int | None = None
        self._floor_bound: datetime | None = None
        self._applied: set[int] = set()  # seqs at or below the floor applied since reset

    @property
    def open_gaps(self) -> int:
        return len(self._gaps)

    @property
    def full_window(self) -> bool:
        """Whether polls still re-read the whole window below the floor."""
        return self._floor is not None

    def reset(self, seq: int, ref: datetime) -> None:
        """Positioned at ``seq``, with nothing known about which seqs below it are in."""
        self.seq, self.ref = seq, ref
        self._gaps = {}
        self._floor, self._floor_bound, self._applied = seq, None, set()

    def plan(self, now: datetime, window: timedelta) -> Plan:
        """This poll's reads, ``now`` being the clock it read first. Drops what has
        become too late; safe to call again if the poll then fails (``ref`` stays)."""
        assert self.ref is not None, "reset() first"
        since = self.ref - window
        # ``now`` is after the previous poll's reads: the bound of what they found missing.
        if self._floor is not None and self._floor_bound is None:
            self._floor_bound = now
        for seq, bound in list(self._gaps.items()):
            if bound is None:
                self._gaps[seq] = now
            elif bound < since:
                del self._gaps[seq]
        if self._floor_bound is not None and self._floor_bound < since:
            self._floor, self._floor_bound, self._applied = None, None, set()
        return Plan(since, self._floor, sorted(self._gaps))

    def unapplied(self, late: Sequence[Change]) -> list[Change]:
        """``late`` (oldest first) less the rows at or below the floor already applied."""
        return [c for c in late if c.seq not in self._applied]

    def advance(self, late: Sequence[Change], fresh: Sequence[Change], now: datetime) -> None:
        """Record a poll's rows as applied: ``late`` (from the floor and the gaps) and
        ``fresh`` (past the position, oldest first); ``now`` becomes ``ref``."""
        for change in late:
            if self._floor is not None and change.seq <= self._floor:
                self._applied.add(change.seq)
            else:
                self._gaps.pop(change.seq, None)
        if fresh:
            last = fresh[-1].seq
            seen = {c.seq for c in fresh}
            if last - self.seq - len(fresh) > MAX_NEW_GAPS:
                # The open gaps are at or below the new floor: its reads cover them.
                self._gaps = {}
                self._floor, self._floor_bound = last, None
                self._applied |= seen
            else:
                self._gaps.update((s, None) for s in range(self.seq + 1, last) if s not in seen)
            self.seq = last
        self.ref = now
