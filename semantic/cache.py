"""The semantic cache: lookup, store (backfill), invalidate, rebuild.

A lookup embeds only the question and searches only the question's partition
(:mod:`semantic.partition`): a hard filter, so another tenant, model, embedder,
parameter set or conversation can never be a candidate. Among the ``top_k``
nearest entries, the best one at or above the threshold that is not expired and
that the validator accepts (and, when the policy sets a ``verifier_cut``, that the
pair verifier scores above it: :mod:`semantic.verification`) is served. If none is,
the miss carries the reason of the best candidate turned down (``expired``, or the
validator's: ``entity_mismatch:<kind>``, ``guarded:<scenario>``), else
``below_threshold``, or ``empty`` when the partition has no entries. Looking past a
refused top candidate matters: for "status of order 12346" the stored "order 12345"
may score higher than the stored "order 12346"; the first is refused, the second served.

The database is the source of truth and each process keeps the indexes in
memory: writes go to the database first, then to the index, under one lock, so
a reader never sees an index entry whose row was never written. Other replicas'
writes arrive through the change log (:mod:`semantic.replay`); a row that has
vanished before that (another replica invalidated it) is also dropped from the
index when a lookup meets it, and expired entries are deleted lazily the same way.

``lookup(..., trace=True)`` makes the same decision as a dry run and returns
every step it took (:mod:`semantic.trace`); the admin API's explain renders
that trace, so what it reports is what serving does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from semantic.candidates import choose, decided_result, trace_candidates
from semantic.embedder_base import TextEmbedder
from semantic.errors import WouldBlockError
from semantic.fences import Stored, Unsettled, drop_if_overtaken, raise_fence
from semantic.fences import withdraw as withdraw_entry
from semantic.hit_counter import DEFAULT_FLUSH_SECONDS, HitCounter
from semantic.hit_validator import HitValidator
from semantic.hits import confirm_pending, served_hit
from semantic.partition import SemanticQuery
from semantic.partitioned_index import PartitionedIndex
from semantic.policy import DEFAULT_POLICY, SemanticPolicy
from semantic.question_vectors import QuestionVectors, memo_scope
from semantic.rebuild import rebuild_index
from semantic.results import BELOW_THRESHOLD, EMPTY, UNSUPPORTED_TEXT, LookupResult, StoreResult
from semantic.storable import new_entry, store_skip_reason
from semantic.store import EntryStore, StoredEntry
from semantic.trace import NO_TRACE, LookupTrace
from semantic.verification import HitVerifier

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class SemanticCache:
    """Tenant-partitioned semantic cache over an embedder, an entry store and an index."""

    def __init__(
        self,
        embedder: TextEmbedder,
        store: EntryStore,
        index: PartitionedIndex | None = None,
        *,
        validator: HitValidator | None = None,
        verifier: HitVerifier | None = None,
        clock: Clock = utc_now,
        hit_flush_seconds: float | None = DEFAULT_FLUSH_SECONDS,
    ) -> None:
        self.vectors = QuestionVectors(embedder)
        self.entries = store
        self.index = index if index is not None else PartitionedIndex(embedder.dim)
        if self.index.dim != embedder.dim:
            raise ValueError(f"index dim {self.index.dim} != embedder dim {embedder.dim}")
        self.validator = validator
        # Consulted only for a policy with a verifier_cut; the gateway may set it after
        # construction (the model loads in the lifespan, after the cache is built).
        self.verifier = verifier
        self._clock = clock
        # Hit counts are written in batches by a background thread (semantic/hit_counter.py);
        # None: one write per hit, in the request.
        self.hits = HitCounter(store, hit_flush_seconds) if hit_flush_seconds else None
        # Serializes database+index mutations so the two never disagree for long.
        self._write_lock = threading.RLock()
        # Stored answers whose fence a database blip left unread (semantic/fences.py).
        self.unsettled = Unsettled()

    @property
    def write_lock(self) -> AbstractContextManager[bool]:
        """Held across every database+index mutation; replaying another replica's
        changes (:mod:`semantic.replay`) takes it too, for the same reason."""
        return self._write_lock

    @contextmanager
    def writing(self, wait: float | None = None) -> Iterator[bool]:
        """Hold the write lock, waiting at most ``wait`` seconds (None: as long as it
        takes); yields whether it was taken. A backfill passes a bound: a rebuild or a
        snapshot holds it for minutes, and an answer given must not wait (``busy``)."""
        taken = self._write_lock.acquire(timeout=-1 if wait is None else max(wait, 0.0))
        try:
            yield taken
        finally:
            if taken:
                self._write_lock.release()

    @property
    def embedder_id(self) -> str:
        return self.embedder.embedder_id

    def fence(self, tenant: str) -> None:
        """Before invalidating: answers to questions asked till now are not kept."""
        raise_fence(self.entries, tenant, self.now())

    def now(self) -> datetime:
        """The cache's clock (TTLs, fences; the gateway stamps requests with it)."""
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the cache clock must return aware datetimes")
        return now.astimezone(UTC)

    def partition_key(self, query: SemanticQuery) -> str:
        return query.partition_key(self.embedder_id)

    @property
    def embedder(self) -> TextEmbedder:
        return self.vectors.embedder

    @embedder.setter
    def embedder(self, embedder: TextEmbedder) -> None:
        self.vectors.embedder = embedder

    def is_supported(self, question: str, tenant: str = "") -> bool:
        return self.vectors.is_supported(question, tenant)

    def _embed(self, tenant: str, question: str) -> NDArray[np.float32]:
        return self.vectors.vector(tenant, question)

    # -- lookup ------------------------------------------------------------------
    def lookup(
        self,
        query: SemanticQuery,
        policy: SemanticPolicy = DEFAULT_POLICY,
        *,
        trace: bool = False,
        show: int = 0,
        local_only: bool = False,
    ) -> LookupResult:
        """Serve ``query`` from the cache if an entry qualifies (see module docstring).

        With ``trace`` the result carries a :class:`~semantic.trace.LookupTrace` of every
        step, and the lookup is a dry run: the same decision, but no hit is counted, no
        expiry moves and nothing is deleted. ``show`` (traced only) searches at least
        that many neighbours for the report; only ``policy.top_k`` of them may be served.

        ``local_only`` decides from memory alone (the question's vector, the rows in the
        store's memo, the verifier's verdicts, a hit counted in memory) and raises
        :class:`~semantic.errors.WouldBlockError`, having written nothing, at the first
        step that would wait; the caller then runs the same lookup in a worker thread.
        """
        if trace and local_only:
            raise ValueError("a traced lookup is never local_only")
        tr = LookupTrace() if trace else NO_TRACE
        key = self.partition_key(query)
        tr.asked(query.question)
        tr.partition(key)
        refusal = None
        if self.validator is not None and policy.guards:
            scope = memo_scope(query)
            guard = partial(self.validator.guard, query.question, policy.guards, scope=scope)
            # keyed by the validator too: one swapped in (tests, a reload) has its own rules
            guards = (str(id(self.validator)), *policy.guards)
            refusal = self.vectors.guarded(scope, query.question, guards, guard)
        tr.step("guards", refusal is None, refusal)
        if refusal is not None:
            return LookupResult(False, key, reason=refusal, trace=tr.result)
        supported = self.is_supported(query.question, memo_scope(query))
        tr.step("coverage", supported, None if supported else UNSUPPORTED_TEXT)
        if not supported:
            return LookupResult(False, key, reason=UNSUPPORTED_TEXT, trace=tr.result)
        size = self.index.size(key, blocking=not local_only)
        tr.partition(key, size)
        tr.step("partition_not_empty", size > 0, key)
        if size == 0:  # nothing to compare: skip embedding
            return LookupResult(False, key, reason=EMPTY, trace=tr.result)
        vector = self._vector(query, local_only)
        k = max(policy.top_k, show) if trace else policy.top_k
        found = self.index.search(key, vector, k, blocking=not local_only)
        candidates = found[: policy.top_k]
        if not candidates:
            return LookupResult(False, key, reason=EMPTY, embedding=vector, trace=tr.result)
        best_score = candidates[0][1]
        eligible = [(i, s) for i, s in candidates if policy.reaches(s)]
        tr.searched(policy.threshold, best_score, policy.verifier_cut)
        tr.step(
            "threshold", bool(eligible), f"best score {best_score} vs threshold {policy.threshold}"
        )
        if not eligible and not trace:
            return LookupResult(
                False, key, reason=BELOW_THRESHOLD, score=best_score, embedding=vector
            )
        # A report shows every neighbour searched; serving reads only the eligible rows.
        now = self.now()
        wanted = [i for i, _ in (found if trace else eligible)]
        rows = self.entries.get_many(wanted, recent_at=now, local_only=local_only)
        choice = choose(
            self.validator,
            query,
            key,
            eligible,
            rows,
            policy,
            now,
            self.verifier,
            local_only=local_only,
        )
        if trace:
            trace_candidates(tr, self.validator, query, key, found, rows, choice, policy, now)
            remaining = size - len(choice.vanished)
            return decided_result(tr, key, choice, best_score, vector, remaining, policy)
        if choice.served is not None:
            entry, score = choice.served
            return served_hit(
                self.entries, self.hits, key, entry, score, vector, policy, now,
                choice.verifier_score, local_only=local_only,
            )  # fmt: skip
        if local_only and (choice.vanished or choice.expired):
            raise WouldBlockError("vanished or expired rows must be forgotten", reason="store")
        self._forget(key, choice.vanished, choice.expired, now)
        remaining = self.index.size(key, blocking=not local_only)
        return decided_result(tr, key, choice, best_score, vector, remaining, policy)

    def _vector(self, query: SemanticQuery, local_only: bool) -> NDArray[np.float32]:
        if not local_only:
            return self._embed(memo_scope(query), query.question)
        vector = self.vectors.cached(memo_scope(query), query.question)
        if vector is None:
            raise WouldBlockError("the question must be embedded", reason="embedding")
        return vector

    def confirm_hit(
        self,
        query: SemanticQuery,
        pending: LookupResult,
        policy: SemanticPolicy,
        *,
        local_only: bool = False,
    ) -> LookupResult:
        """Count and serve a pending hit its caller accepted (semantic/hits.py)."""
        hits, now = self.hits, self.now()
        return confirm_pending(
            self.entries, hits, query, pending, policy, now, local_only=local_only
        )

    def _forget(self, key: str, vanished: list[int], expired: list[int], now: datetime) -> None:
        """Drop vanished rows from the index and delete expired ones everywhere.

        Skipped while another writer holds the lock: a rebuild can hold it for minutes,
        and lookups must not queue behind it for a cleanup. Such rows are never served
        meanwhile, and a later lookup (or the rebuild) drops them."""
        if not vanished and not expired:
            return
        if not self._write_lock.acquire(blocking=False):
            return
        try:
            gone = list(vanished)
            if expired:
                gone += [i for i, _ in self.entries.delete(expired, expired_at=now)]
            self.index.remove(key, gone)
        finally:
            self._write_lock.release()

    # -- store -------------------------------------------------------------------
    def store(
        self,
        query: SemanticQuery,
        response: Mapping[str, Any],
        policy: SemanticPolicy = DEFAULT_POLICY,
        *,
        embedding: ArrayLike | None = None,
        partition_key: str | None = None,
        wait: float | None = None,
        asked_at: datetime | None = None,
    ) -> StoreResult:
        """Backfill ``response`` (an OpenAI response body) for ``query``.

        Idempotent: the same normalized question in the same partition updates the
        entry. Uncacheable responses (:mod:`semantic.cacheability`) and guarded
        questions are skipped, with the reason in the result. ``embedding`` and
        ``partition_key`` may come from the lookup's result (same query): nothing is
        embedded or hashed twice. Everything is validated before the database is
        touched. With ``wait``, a write lock held longer (a rebuild) skips with reason
        ``busy``; with ``asked_at`` (when the question was asked), an answer its
        tenant's invalidation overtook is not kept (``invalidated``, semantic/fences.py).
        """
        key = partition_key if partition_key is not None else self.partition_key(query)
        skip = store_skip_reason(self, query, response, policy)  # the backfill's check too
        if skip is not None:
            return StoreResult(False, key, reason=skip)
        new, now = new_entry(self, query, response, policy, key, embedding)
        vector = new.embedding
        self.settle()
        with self.writing(wait) as taken:
            if not taken:
                return StoreResult(False, key, reason="busy")
            entry, created = self.entries.upsert(new, now=now)
            fenced = drop_if_overtaken(
                self.entries, query.tenant, asked_at, entry.id, self.unsettled, key
            )
            if fenced is not None:  # deleted (an update's old vector too), logged: for all
                self._remove_from_index(fenced)
                return StoreResult(False, key, reason="invalidated")
            self.index.add(key, [entry.id], vector.reshape(1, -1))
        return StoreResult(True, key, entry_id=entry.id, created=created)

    # -- invalidation and maintenance -----------------------------------------
    def invalidate(
        self,
        *,
        entry_id: int | Sequence[int] | None = None,
        partition_key: str | None = None,
        tenant: str | None = None,
    ) -> int:
        """Remove entries by id (one or several, in one transaction), a partition or a
        tenant's entries (both narrow each other); how many rows went (unknown ids: 0)."""
        if entry_id is not None and (partition_key is not None or tenant is not None):
            raise ValueError("invalidate by entry_id alone, or by partition_key and/or tenant")
        if entry_id is None and partition_key is None and tenant is None:
            raise ValueError("invalidate needs entry_id, partition_key or tenant")
        with self._write_lock:
            if entry_id is not None:
                removed = self.entries.delete([entry_id] if isinstance(entry_id, int) else entry_id)
            else:
                removed = self.entries.delete_where(partition_key=partition_key, tenant=tenant)
            self._remove_from_index(removed)
        return len(removed)

    def withdraw(
        self,
        entry_id: int,
        partition_key: str,
        tenant: str,
        asked_at: datetime | None,
        is_orphan: Callable[[], bool],
    ) -> None:
        """Take out an entry just stored whose writer the caller could not confirm: out of
        this index at once, deleted now or once ``is_orphan`` answers (``fences.withdraw``:
        the delete's error goes on)."""
        stored = Stored(tenant, asked_at, entry_id, partition_key, is_orphan)
        with self._write_lock:
            self._remove_from_index([(entry_id, partition_key)])
            withdraw_entry(self.entries, self.unsettled, stored)

    def purge_expired(self, tenant: str | None = None) -> int:
        """Delete every expired entry (of one ``tenant``, or all) now (lookups also do it
        lazily)."""
        with self._write_lock:
            removed = self.entries.purge_expired(self.now(), tenant)
            self._remove_from_index(removed)
        return len(removed)

    def settle(self) -> None:
        """Read the fences a database blip left unread and delete what they overtook
        (``Unsettled``: each write, each replay of the change log, and close call it),
        outside the write lock, one caller at a time: a database that hangs holds up that
        caller, not every write (a rebuild racing a delete indexes a row gone: unserved)."""
        if len(self.unsettled):
            deleted = self.unsettled.settle(self.entries)
            if deleted:
                with self._write_lock:
                    self._remove_from_index(deleted)

    def _remove_from_index(self, removed: Iterable[tuple[int, str]]) -> None:
        by_partition: dict[str, list[int]] = {}
        for entry_id, key in removed:
            by_partition.setdefault(key, []).append(entry_id)
        for key, ids in by_partition.items():
            self.index.remove(key, ids)

    def rebuild(self, *, progress: bool = True) -> int:
        """Reload every partition index from the store (at start-up, or by the change
        feed; see :mod:`semantic.rebuild`: lookups keep the old partitions until the new
        ones are built). Returns the number of entries indexed."""
        with self._write_lock:
            self.settle()
            self.entries.memo.clear()  # rows read before may no longer be the rows now
            count = rebuild_index(
                self.entries, self.index, self.embedder_id, self.now(), progress=progress
            )
            self._remove_from_index(self.unsettled.indexed())  # still unread: not served
            return count

    def get_entry(self, entry_id: int) -> StoredEntry:
        """The stored entry (raises :class:`~semantic.errors.EntryNotFoundError`), with
        every hit counted so far written first (a failed write leaves it pending)."""
        if self.hits is not None:
            self.hits.flush()
        return self.entries.get(entry_id)

    def close(self) -> None:
        """Write the pending hit counts and stop their thread, and settle what a blip left
        unsettled (the store stays open)."""
        self.settle()
        if self.hits is not None:
            self.hits.close()
