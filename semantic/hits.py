"""Counting a served entry's hit, and what expiry the hit is served with.

A hit is counted in memory and written in batches (:class:`~semantic.hit_counter.
HitCounter`) unless it slides the entry's expiry (a policy with ``sliding_ttl``) or
no counter is configured: then it is written at once, because the next lookup (here
or on another replica) must not find the entry expired by its old expiry, nor by the
policy's sliding TTL counted from its old last hit.

A hit inside the policy's ``pending_band`` is counted only once the caller confirms
it (:func:`confirm_pending`): one its judge refuses is neither counted nor slides.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from semantic.candidates import hit_result, served_expiry, slid_expiry, verdict
from semantic.errors import StoreUnavailableError, WouldBlockError
from semantic.hit_counter import HitCounter
from semantic.partition import SemanticQuery
from semantic.policy import SemanticPolicy
from semantic.results import LookupResult
from semantic.store import EntryStore, StoredEntry

logger = logging.getLogger("semantic.cache")


def writes_hit_at_once(
    counter: HitCounter | None, entry: StoredEntry, policy: SemanticPolicy, now: datetime
) -> bool:
    """Whether :func:`record_hit` writes to the database rather than counting in memory."""
    return counter is None or slid_expiry(entry, policy, now) is not None


def record_hit(
    entries: EntryStore,
    counter: HitCounter | None,
    entry: StoredEntry,
    policy: SemanticPolicy,
    now: datetime,
) -> datetime | None:
    """Count the hit; the expiry the answer is served with (None: none)."""
    slid = slid_expiry(entry, policy, now)
    if counter is not None and slid is None:
        counter.record(entry.id, at=now)
    else:
        try:
            entries.record_hit(entry.id, at=now, expires_at=slid)
        except StoreUnavailableError as exc:
            # The answer was read a moment ago; losing a hit count is better than a miss.
            logger.warning("semantic: could not record hit on entry %s: %s", entry.id, exc)
    return slid if slid is not None else served_expiry(entry, policy)


def served_hit(
    entries: EntryStore,
    counter: HitCounter | None,
    key: str,
    entry: StoredEntry,
    score: float,
    vector: NDArray[np.float32],
    policy: SemanticPolicy,
    now: datetime,
    verifier_score: float | None,
    *,
    local_only: bool = False,
) -> LookupResult:
    """The lookup's hit on ``entry``: counted, or pending inside ``policy.pending_band``.
    ``local_only``: ``WouldBlockError`` rather than writing the hit at once."""
    if policy.is_pending(score):
        expiry = served_expiry(entry, policy)
        pending = hit_result(
            key, entry, score, vector, expires_at=expiry, verifier_score=verifier_score
        )
        return replace(pending, is_pending=True)
    if local_only and writes_hit_at_once(counter, entry, policy, now):
        raise WouldBlockError("the hit is written at once", reason="store")
    expires_at = record_hit(entries, counter, entry, policy, now)
    return hit_result(
        key, entry, score, vector, expires_at=expires_at, verifier_score=verifier_score
    )


def confirm_pending(
    entries: EntryStore,
    counter: HitCounter | None,
    query: SemanticQuery,
    pending: LookupResult,
    policy: SemanticPolicy,
    now: datetime,
    *,
    local_only: bool = False,
) -> LookupResult:
    """The pending hit ``pending`` counted and served, if its entry is servable now;
    else a miss with the reason (``vanished``, ``expired``, ``max_age``): the check
    that confirmed it (a judge asking a model) took a while, in which the entry may
    have been invalidated or have expired. ``local_only``: ``WouldBlockError``, with
    nothing written, where the row must be read or the hit written at once."""
    if not pending.is_pending or pending.entry_id is None or pending.embedding is None:
        raise ValueError("only a pending hit (LookupResult.is_pending) is confirmed")
    key, score = pending.partition_key, pending.score or 0.0
    entry = entries.get_many([pending.entry_id], recent_at=now, local_only=local_only).get(
        pending.entry_id
    )
    why = verdict(None, query, key, entry, score, policy, now)  # the rest was checked
    if why is not None or entry is None:
        return LookupResult(
            False, key, reason=why, score=score, entry_id=pending.entry_id,
            embedding=pending.embedding,
        )  # fmt: skip
    return served_hit(
        entries, counter, key, entry, score, pending.embedding,
        replace(policy, pending_band=None), now, pending.verifier_score,
        local_only=local_only,
    )  # fmt: skip
