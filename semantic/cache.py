"""The semantic cache: lookup, store (backfill), invalidate, rebuild.

A lookup embeds only the question and searches only the question's partition
(:mod:`semantic.partition`): a hard filter, so another tenant, model, embedder,
parameter set or conversation can never be a candidate. Among the ``top_k``
nearest entries, the best one at or above the threshold that is not expired and
that the validator accepts is served. If none is, the miss carries the reason
of the best candidate that was turned down (``expired``, or the validator's
reason: ``entity_mismatch:<kind>``, ``guarded:<scenario>``), else
``below_threshold``, or ``empty`` when the partition has no entries at all. Looking past a refused
top candidate matters: for "status of order 12346" the stored "order 12345"
question may score higher than the stored "order 12346" one; the validator
refuses the first and the second is served.

The database is the source of truth and each process keeps the indexes in
memory: writes go to the database first, then to the index, under one lock, so
a reader never sees an index entry whose row was never written. Other replicas'
writes arrive through the change log (:mod:`semantic.replay`); a row that has
vanished before that (another replica invalidated it) is also dropped from the
index when a lookup meets it, and expired entries are deleted lazily the same way.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from tqdm import tqdm

from semantic.cacheability import uncacheable_reason
from semantic.embedder import TextEmbedder
from semantic.errors import InvalidRequestError, StoreUnavailableError
from semantic.hit_validator import HitValidator
from semantic.index import PartitionedIndex, check_vectors
from semantic.partition import SemanticQuery
from semantic.policy import DEFAULT_POLICY, SemanticPolicy
from semantic.results import BELOW_THRESHOLD, EMPTY, EXPIRED, LookupResult, StoreResult
from semantic.store import EntryStore, NewEntry, StoredEntry

logger = logging.getLogger(__name__)

#: Question texts whose embeddings are kept (LRU); 4,096 × 384 floats ≈ 6 MiB.
VECTOR_CACHE_SIZE = 4096

Clock = Callable[[], datetime]

_REBUILD_BATCH = 1000


def utc_now() -> datetime:
    return datetime.now(UTC)


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _json_copy(value: Any, what: str) -> Any:
    """A detached, JSON-only copy: exactly what the database will give back later."""
    try:
        return json.loads(json.dumps(value, default=_json_default, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidRequestError(f"{what} is not JSON serializable: {exc}") from exc


class SemanticCache:
    """Tenant-partitioned semantic cache over an embedder, an entry store and an index."""

    def __init__(
        self,
        embedder: TextEmbedder,
        store: EntryStore,
        index: PartitionedIndex | None = None,
        *,
        validator: HitValidator | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.embedder = embedder
        self.entries = store
        self.index = index if index is not None else PartitionedIndex(embedder.dim)
        if self.index.dim != embedder.dim:
            raise ValueError(f"index dim {self.index.dim} != embedder dim {embedder.dim}")
        self.validator = validator
        self._clock = clock
        # Serializes database+index mutations so the two never disagree for long.
        self._write_lock = threading.RLock()
        self._vector_lock = threading.Lock()
        self._vectors: OrderedDict[str, NDArray[np.float32]] = OrderedDict()

    @property
    def write_lock(self) -> AbstractContextManager[bool]:
        """Held across every database+index mutation; replaying another replica's
        changes (:mod:`semantic.replay`) takes it too, for the same reason."""
        return self._write_lock

    @property
    def embedder_id(self) -> str:
        return self.embedder.embedder_id

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the cache clock must return aware datetimes")
        return now.astimezone(UTC)

    def partition_key(self, query: SemanticQuery) -> str:
        return query.partition_key(self.embedder_id)

    def _embed(self, question: str) -> NDArray[np.float32]:
        # Popular questions repeat word for word; an embedding is ~10 ms of CPU, a dict
        # hit microseconds. The vector depends only on the text and this embedder.
        with self._vector_lock:
            cached = self._vectors.get(question)
            if cached is not None:
                self._vectors.move_to_end(question)
                return cached
        vector = check_vectors(self.embedder.embed([question]), self.embedder.dim)[0]
        vector.setflags(write=False)
        with self._vector_lock:
            self._vectors[question] = vector
            if len(self._vectors) > VECTOR_CACHE_SIZE:
                self._vectors.popitem(last=False)
        return vector

    # -- lookup ------------------------------------------------------------------
    def lookup(self, query: SemanticQuery, policy: SemanticPolicy = DEFAULT_POLICY) -> LookupResult:
        """Serve ``query`` from the cache if an entry qualifies (see module docstring)."""
        key = self.partition_key(query)
        if self.validator is not None and policy.guards:
            refusal = self.validator.guard(query.question, policy.guards)
            if refusal:
                return LookupResult(False, key, reason=refusal)
        if self.index.size(key) == 0:
            return LookupResult(False, key, reason=EMPTY)  # nothing to compare: skip embedding
        vector = self._embed(query.question)
        candidates = self.index.search(key, vector, policy.top_k)
        if not candidates:
            return LookupResult(False, key, reason=EMPTY, embedding=vector)
        best_score = candidates[0][1]
        eligible = [(i, s) for i, s in candidates if s >= policy.threshold]
        if not eligible:
            return LookupResult(
                False, key, reason=BELOW_THRESHOLD, score=best_score, embedding=vector
            )
        rows = self.entries.get_many(i for i, _ in eligible)
        now = self._now()
        refused: tuple[str, int] | None = None  # reason and id of the best turned-down entry
        expired: list[int] = []
        vanished: list[int] = []
        for entry_id, score in eligible:
            entry = rows.get(entry_id)
            if entry is None or entry.partition_key != key:
                vanished.append(entry_id)
                continue
            if entry.is_expired(now):
                expired.append(entry_id)
                refused = refused or (EXPIRED, entry_id)
                continue
            reason = self._refusal(query, entry, score, policy)
            if reason is not None:
                refused = refused or (reason, entry_id)
                continue
            return self._hit(key, entry, score, vector, policy, now)
        self._forget(key, vanished, expired, now)
        if refused is not None:
            return LookupResult(
                False,
                key,
                reason=refused[0],
                score=best_score,
                entry_id=refused[1],
                embedding=vector,
            )
        reason = EMPTY if self.index.size(key) == 0 else BELOW_THRESHOLD
        return LookupResult(False, key, reason=reason, score=best_score, embedding=vector)

    def _refusal(
        self, query: SemanticQuery, entry: StoredEntry, score: float, policy: SemanticPolicy
    ) -> str | None:
        if self.validator is None:
            return None
        # The guards already passed on this question in lookup(): only entities (and the
        # judge) are left to check against each candidate.
        refusal = self.validator.check(
            query.question,
            entry.question,
            entry.entities,
            score,
            policy.entity_kinds,
            (),
        )
        return refusal or None

    def _hit(
        self,
        key: str,
        entry: StoredEntry,
        score: float,
        vector: NDArray[np.float32],
        policy: SemanticPolicy,
        now: datetime,
    ) -> LookupResult:
        expires_at = entry.expires_at
        if policy.sliding_ttl and entry.ttl_seconds:
            expires_at = now + timedelta(seconds=entry.ttl_seconds)
        try:
            self.entries.record_hit(
                entry.id, at=now, expires_at=expires_at if policy.sliding_ttl else None
            )
        except StoreUnavailableError as exc:
            # The answer was read a moment ago; losing a hit count is better than a miss.
            logger.warning("semantic: could not record hit on entry %s: %s", entry.id, exc)
        return LookupResult(
            True,
            key,
            score=score,
            entry_id=entry.id,
            answer=entry.answer,
            cached_question=entry.question,
            expires_at=expires_at,
            embedding=vector,
        )

    def _forget(self, key: str, vanished: list[int], expired: list[int], now: datetime) -> None:
        """Drop vanished rows from the index and delete expired ones everywhere."""
        if not vanished and not expired:
            return
        with self._write_lock:
            gone = list(vanished)
            if expired:
                gone += [i for i, _ in self.entries.delete(expired, expired_at=now)]
            self.index.remove(key, gone)

    # -- store -------------------------------------------------------------------
    def store(
        self,
        query: SemanticQuery,
        response: Mapping[str, Any],
        policy: SemanticPolicy = DEFAULT_POLICY,
        *,
        embedding: ArrayLike | None = None,
    ) -> StoreResult:
        """Backfill ``response`` (an OpenAI response body) for ``query``.

        Idempotent: the same normalized question in the same partition updates
        the existing entry. Uncacheable responses (:mod:`semantic.cacheability`)
        and guarded questions are skipped, with the reason in the result.
        ``embedding`` may be the vector from the preceding lookup's result.
        Everything is validated before the database is touched.
        """
        key = self.partition_key(query)
        skip = uncacheable_reason(response, query.endpoint)
        if skip is None and self.validator is not None and policy.guards:
            skip = self.validator.guard(query.question, policy.guards) or None
        if skip is not None:
            return StoreResult(False, key, reason=skip)
        if embedding is None:
            vector = self._embed(query.question)
        else:
            vectors = check_vectors(embedding, self.embedder.dim)
            if vectors.shape[0] != 1:
                raise InvalidRequestError("store() takes one embedding")
            vector = vectors[0]
        answer = _json_copy(dict(response), "response body")
        entities = None
        if self.validator is not None:
            entities = _json_copy(self.validator.extract(query.question), "entities")
        now = self._now()
        ttl = policy.ttl_seconds
        new = NewEntry(
            partition_key=key,
            tenant=query.tenant,
            question=query.question,
            answer=answer,
            embedding=vector,
            embedder_id=self.embedder_id,
            entities=entities,
            expires_at=now + timedelta(seconds=ttl) if ttl else None,
            ttl_seconds=ttl,
        )
        with self._write_lock:
            entry, created = self.entries.upsert(new, now=now)
            self.index.add(key, [entry.id], vector.reshape(1, -1))
        return StoreResult(True, key, entry_id=entry.id, created=created)

    # -- invalidation and maintenance -----------------------------------------
    def invalidate(
        self,
        *,
        entry_id: int | None = None,
        partition_key: str | None = None,
        tenant: str | None = None,
    ) -> int:
        """Remove one entry, a whole partition, or a tenant's entries (partition and
        tenant together narrow each other). Returns how many entries were removed
        from the database; unknown ids remove nothing."""
        if entry_id is not None and (partition_key is not None or tenant is not None):
            raise ValueError("invalidate by entry_id alone, or by partition_key and/or tenant")
        if entry_id is None and partition_key is None and tenant is None:
            raise ValueError("invalidate needs entry_id, partition_key or tenant")
        with self._write_lock:
            if entry_id is not None:
                removed = self.entries.delete([entry_id])
            else:
                removed = self.entries.delete_where(partition_key=partition_key, tenant=tenant)
            self._remove_from_index(removed)
        return len(removed)

    def purge_expired(self) -> int:
        """Delete every expired entry now (lookups also do it lazily)."""
        with self._write_lock:
            removed = self.entries.purge_expired(self._now())
            self._remove_from_index(removed)
        return len(removed)

    def _remove_from_index(self, removed: Iterable[tuple[int, str]]) -> None:
        by_partition: dict[str, list[int]] = {}
        for entry_id, key in removed:
            by_partition.setdefault(key, []).append(entry_id)
        for key, ids in by_partition.items():
            self.index.remove(key, ids)

    def rebuild(self, *, progress: bool = True) -> int:
        """Reload every partition index from the store (at start-up).

        Only entries written with the current embedder are loaded; expired ones
        are purged first. Returns the number of entries indexed.
        """
        dim = self.embedder.dim
        with self._write_lock:
            now = self._now()
            self.entries.purge_expired(now)
            total = self.entries.count(embedder_id=self.embedder_id)
            self.index.clear()
            pending: dict[str, tuple[list[int], list[NDArray[np.float32]]]] = {}
            skipped = 0
            with tqdm(
                total=total, desc="semantic index", unit="entry", disable=not progress
            ) as bar:
                for count, entry in enumerate(
                    self.entries.iter_entries(embedder_id=self.embedder_id), start=1
                ):
                    vec = entry.embedding
                    if vec.shape != (dim,) or not np.isfinite(vec).all() or not vec.any():
                        skipped += 1  # a corrupt row must not stop the start-up
                    elif not entry.is_expired(now):
                        ids, vecs = pending.setdefault(entry.partition_key, ([], []))
                        ids.append(entry.id)
                        vecs.append(vec)
                    if count % _REBUILD_BATCH == 0:
                        self._flush(pending)
                    bar.update(1)
                self._flush(pending)
            if skipped:
                logger.warning("semantic: skipped %d entries with unusable embeddings", skipped)
            return len(self.index)

    def _flush(self, pending: dict[str, tuple[list[int], list[NDArray[np.float32]]]]) -> None:
        for key, (ids, vecs) in pending.items():
            self.index.add(key, ids, np.stack(vecs))
        pending.clear()

    def get_entry(self, entry_id: int) -> StoredEntry:
        """The stored entry (raises :class:`~semantic.errors.EntryNotFoundError`)."""
        return self.entries.get(entry_id)
