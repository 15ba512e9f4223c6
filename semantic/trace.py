"""What a traced lookup records: every check it made, in order, with what it saw.

:meth:`semantic.cache.SemanticCache.lookup` with ``trace=True`` fills a
:class:`LookupTrace` as it decides, so a report built from it (the admin API's
explain) shows the rules that serving applies, never a copy of them. A traced
lookup is a dry run: it reads the index and the store and changes nothing.

An untraced lookup records into :data:`NO_TRACE`, whose methods do nothing: the
serving path builds no trace and pays one no-op call per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from semantic.store import StoredEntry

#: A candidate the index still lists but the database no longer holds (another
#: replica removed it); the lookup drops it and never serves it.
VANISHED = "vanished"


@dataclass(frozen=True)
class TraceStep:
    """One check: its name, whether the request passed it, and what it saw."""

    check: str
    passed: bool
    detail: str | None = None


@dataclass(frozen=True)
class TraceCandidate:
    """One of the nearest entries, as the lookup judged it.

    ``refusal`` is why it could not be served (``None``: it could): ``vanished``,
    ``expired``, ``below_threshold`` or the validator's reason. ``entry`` is the
    stored row (``None`` when vanished), for a report to show. ``verifier_score``
    is the pair verifier's score when the verifier judged this candidate.
    """

    entry_id: int
    score: float
    above_threshold: bool
    refusal: str | None
    entry: StoredEntry | None = field(default=None, repr=False)
    verifier_score: float | None = None


@dataclass
class LookupTrace:
    """The steps of one lookup (the gateway's and the cache's) and what they found."""

    steps: list[TraceStep] = field(default_factory=list)
    question: str | None = None
    partition_key: str | None = None
    partition_size: int = 0
    threshold: float | None = None
    best_score: float | None = None
    verifier_cut: float | None = None
    candidates: list[TraceCandidate] = field(default_factory=list)
    served_entry_id: int | None = None

    def step(self, check: str, passed: bool, detail: str | None = None) -> None:
        self.steps.append(TraceStep(check, passed, detail))

    def asked(self, question: str) -> None:
        self.question = question

    def partition(self, key: str, size: int | None = None) -> None:
        self.partition_key = key
        if size is not None:
            self.partition_size = size

    def searched(
        self, threshold: float, best_score: float | None, verifier_cut: float | None = None
    ) -> None:
        self.threshold = threshold
        self.best_score = best_score
        self.verifier_cut = verifier_cut

    def candidate(self, candidate: TraceCandidate) -> None:
        self.candidates.append(candidate)

    def served(self, entry_id: int) -> None:
        self.served_entry_id = entry_id

    def follow(self, inner: LookupTrace) -> None:
        """Append the steps of a lookup made after this trace's own steps (the cache's,
        after the gateway's) and take what it found."""
        self.steps.extend(inner.steps)
        self.question = inner.question or self.question
        self.partition_key = inner.partition_key
        self.partition_size = inner.partition_size
        self.threshold = inner.threshold
        self.best_score = inner.best_score
        self.verifier_cut = inner.verifier_cut
        self.candidates = list(inner.candidates)
        self.served_entry_id = inner.served_entry_id

    @property
    def result(self) -> LookupTrace | None:
        """What a lookup result carries: this trace (None for :data:`NO_TRACE`)."""
        return self


class _NoTrace(LookupTrace):
    """Records nothing: the untraced (serving) lookup's recorder."""

    def step(self, check: str, passed: bool, detail: str | None = None) -> None:
        pass

    def asked(self, question: str) -> None:
        pass

    def partition(self, key: str, size: int | None = None) -> None:
        pass

    def searched(
        self, threshold: float, best_score: float | None, verifier_cut: float | None = None
    ) -> None:
        pass

    def candidate(self, candidate: TraceCandidate) -> None:
        pass

    def served(self, entry_id: int) -> None:
        pass

    @property
    def result(self) -> LookupTrace | None:
        return None


#: Shared by every untraced lookup; it holds no state, so sharing it is safe.
NO_TRACE: LookupTrace = _NoTrace()
