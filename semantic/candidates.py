"""Judging a lookup's nearest entries: which one is served, and why the others are not.

:func:`choose` walks the candidates at or above the threshold, best first, and
stops at the first one that may be served; :func:`trace_candidates` puts every
neighbour searched into a trace with the verdict the same rules give it. Both
use :func:`verdict`, so a report can never judge an entry differently from the
lookup that serves it. When the policy has a ``verifier_cut``, every eligible
candidate the validator accepts is scored by the pair verifier in one batch
(:mod:`semantic.verification`) and the best (by similarity) above the cut is
served; the others are ``verifier_refused`` (or ``verifier_error`` when the
verifier failed: never a hit). :func:`hit_result` builds a hit's result (the cache's and a
dry run's); :func:`decided_result` turns a choice that serves
nothing (or a dry run's) into the lookup's result. Nothing here writes: forgetting
vanished and expired entries, and counting a hit, is the cache's job after the choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from numpy.typing import NDArray

from semantic.hit_validator import HitValidator
from semantic.partition import SemanticQuery
from semantic.policy import SemanticPolicy
from semantic.question import normalize_question
from semantic.question_vectors import memo_scope
from semantic.results import BELOW_THRESHOLD, EMPTY, EXPIRED, LookupResult
from semantic.store import StoredEntry
from semantic.trace import VANISHED, LookupTrace, TraceCandidate
from semantic.verification import VERIFIER_REFUSED, HitVerifier, unread_reason, verify

Scored = list[tuple[int, float]]
#: Older than the request's ``max-age`` allows (a per-request refusal, not an expiry).
TOO_OLD = "max_age"


@dataclass
class Choice:
    """The outcome of :func:`choose` over the eligible candidates."""

    served: tuple[StoredEntry, float] | None = None
    refused: tuple[str, int] | None = None  # reason and id of the best turned-down entry
    expired: list[int] = field(default_factory=list)
    vanished: list[int] = field(default_factory=list)
    verdicts: dict[int, str | None] = field(default_factory=dict)  # per judged entry id
    verifier_scores: dict[int, float] = field(default_factory=dict)  # per verified entry id
    # why the verifier refused the best refused entry unread (it scored 0), when known
    verifier_unread: str | None = None

    @property
    def verifier_score(self) -> float | None:
        """The verifier's score of the served entry, else of the best refused one."""
        if self.served is not None:
            return self.verifier_scores.get(self.served[0].id)
        return None if self.refused is None else self.verifier_scores.get(self.refused[1])


def policy_expiry(entry: StoredEntry, policy: SemanticPolicy) -> datetime | None:
    """When the policy's TTL ends the entry's answer (None: the policy sets no TTL).

    A TTL lowered, or turned on, after the entry was stored applies to it at once: its
    own expiry was set with the old TTL (or none). An absolute TTL counts from when the
    answer was written; a sliding one from the entry's last use, its write or its latest
    hit, since each hit slides it (:meth:`SemanticCache._hit`). A sliding hit writes
    ``last_hit_at`` at once and the store forgets its memo row, so the value read here
    is current; hits counted in batches (not sliding) can only make it look older, a
    miss rather than a stale answer."""
    ttl = policy.ttl_seconds
    if not ttl:
        return None
    since = entry.updated_at
    if policy.sliding_ttl and entry.last_hit_at is not None:
        since = max(since, entry.last_hit_at)
    return since + timedelta(seconds=ttl)


def is_past_policy_ttl(entry: StoredEntry, policy: SemanticPolicy, now: datetime) -> bool:
    """Whether the policy's TTL, absolute or sliding, has ended the entry's answer."""
    bound = policy_expiry(entry, policy)
    return bound is not None and bound < now


def served_expiry(entry: StoredEntry, policy: SemanticPolicy) -> datetime | None:
    """The entry's expiry as the policy sees it before any slide: the earlier of its
    own and the policy TTL's, so a lowered TTL reports the earlier one."""
    bounds = [t for t in (entry.expires_at, policy_expiry(entry, policy)) if t is not None]
    return min(bounds, default=None)


def slid_expiry(entry: StoredEntry, policy: SemanticPolicy, now: datetime) -> datetime | None:
    """The expiry a hit slides the entry to (None: nothing slides): now plus the TTL in
    force, the policy's when it is lower than the entry's own (lowered since the entry
    was stored) or when the entry was stored without one (the entry starts sliding, or
    it would never expire under a policy that means it to)."""
    if not policy.sliding_ttl:
        return None
    ttls = [t for t in (entry.ttl_seconds, policy.ttl_seconds) if t]
    return now + timedelta(seconds=min(ttls)) if ttls else None


def verdict(
    validator: HitValidator | None,
    query: SemanticQuery,
    key: str,
    entry: StoredEntry | None,
    score: float,
    policy: SemanticPolicy,
    now: datetime,
) -> str | None:
    """Why ``entry`` cannot be served for ``query`` (threshold aside), or None."""
    if entry is None or entry.partition_key != key:
        return VANISHED
    if entry.is_expired(now):
        return EXPIRED
    if is_past_policy_ttl(entry, policy, now):
        return EXPIRED
    max_age = policy.max_age_seconds
    if max_age is not None and (now - entry.updated_at).total_seconds() > max_age:
        return TOO_OLD
    if validator is None:
        return None
    # The guards already passed on this question before the search: only entities
    # (and the validator's judge, if any) are left to check against each candidate.
    refusal = validator.check(
        query.question, entry.question, entry.entities, score, policy.entity_kinds, (),
        scope=memo_scope(query),
    )  # fmt: skip
    return refusal or None


def choose(
    validator: HitValidator | None,
    query: SemanticQuery,
    key: str,
    eligible: Scored,
    rows: Mapping[int, StoredEntry],
    policy: SemanticPolicy,
    now: datetime,
    verifier: HitVerifier | None = None,
    *,
    local_only: bool = False,
) -> Choice:
    """The first servable entry of ``eligible`` (best first), and what was turned down.
    ``local_only``: verdicts the verifier remembers, else ``WouldBlockError``."""
    choice = Choice()
    verifying = policy.verifier_cut is not None
    accepted: list[tuple[StoredEntry, float]] = []  # passed every rule but the verifier
    for entry_id, score in eligible:
        entry = rows.get(entry_id)
        reason = verdict(validator, query, key, entry, score, policy, now)
        choice.verdicts[entry_id] = reason
        if reason is None and entry is not None:
            if not verifying:
                choice.served = (entry, score)
                return choice
            accepted.append((entry, score))
            continue
        if reason == VANISHED:
            choice.vanished.append(entry_id)
            continue
        if reason == EXPIRED:
            choice.expired.append(entry_id)
        choice.refused = choice.refused or (str(reason), entry_id)
    if accepted:
        _verified(choice, verifier, query, key, accepted, policy, local_only)
    return choice


def _verified(
    choice: Choice,
    verifier: HitVerifier | None,
    query: SemanticQuery,
    key: str,
    accepted: list[tuple[StoredEntry, float]],
    policy: SemanticPolicy,
    local_only: bool = False,
) -> None:
    """Score ``accepted`` in one batch; serve the best above the cut, refuse the rest.

    A cached question equal to the new one once normalized (the store's own identity
    of a question: a backfill of either would write the other's entry) needs no
    verifying: it scores 1.0 and is not sent to the verifier. That normalization
    folds only what cannot change an answer (semantic/question.py: case, spacing,
    trailing question marks; not ``x²`` into ``x2`` nor ``20!`` into ``20``); the
    English verifier reads lowercased text, so case could not move its score anyway."""
    cut = policy.verifier_cut
    assert cut is not None
    asked = normalize_question(query.question)
    same = [normalize_question(e.question) == asked for e, _ in accepted]
    others = [e.question for (e, _), s in zip(accepted, same, strict=True) if not s]
    # The partition key scopes any verdicts the verifier remembers to this tenant.
    scored, failure = (
        verify(verifier, query.question, others, key, local_only=local_only)
        if others
        else ([], None)
    )
    remaining = iter(scored or [])
    for (entry, score), identical in zip(accepted, same, strict=True):
        verified = 1.0 if identical else next(remaining, None)
        if verified is not None:
            choice.verifier_scores[entry.id] = verified
            if choice.served is None and verified > cut:
                choice.served = (entry, score)
                continue
        reason = VERIFIER_REFUSED if verified is not None else failure or VERIFIER_REFUSED
        choice.verdicts[entry.id] = reason
        # The reason of the best turned-down candidate, as without a verifier.
        if choice.refused is None or (choice.served is None and _before(choice, entry.id)):
            choice.refused = (reason, entry.id)
    if choice.served is None and choice.refused is not None:
        why, refused_id = choice.refused
        if why == VERIFIER_REFUSED and choice.verifier_scores.get(refused_id) == 0.0:
            entry = next(e for e, _ in accepted if e.id == refused_id)
            choice.verifier_unread = unread_reason(verifier, query.question, entry.question, key)


def _before(choice: Choice, entry_id: int) -> bool:
    """Whether ``entry_id`` ranks above the currently reported refusal."""
    assert choice.refused is not None
    order = list(choice.verdicts)
    return order.index(entry_id) < order.index(choice.refused[1])


def trace_candidates(
    trace: LookupTrace,
    validator: HitValidator | None,
    query: SemanticQuery,
    key: str,
    found: Scored,
    rows: Mapping[int, StoredEntry],
    choice: Choice,
    policy: SemanticPolicy,
    now: datetime,
) -> None:
    """Record every neighbour searched with its verdict (entries :func:`choose` did
    not reach are judged by the same :func:`verdict`)."""
    for entry_id, score in found:
        entry = rows.get(entry_id)
        above = policy.reaches(score)
        if entry_id in choice.verdicts:
            reason = choice.verdicts[entry_id]
        elif above:
            reason = verdict(validator, query, key, entry, score, policy, now)
        elif entry is None or entry.partition_key != key:
            reason = VANISHED
        else:
            # Below the threshold the validators never run; only expiry is worth showing.
            reason = EXPIRED if entry.is_expired(now) else BELOW_THRESHOLD
        trace.candidate(
            TraceCandidate(
                entry_id,
                score,
                above,
                reason,
                None if reason == VANISHED else entry,
                choice.verifier_scores.get(entry_id),
            )
        )


def hit_result(
    key: str,
    entry: StoredEntry,
    score: float,
    vector: NDArray[np.float32],
    *,
    expires_at: datetime | None,
    verifier_score: float | None,
    trace: LookupTrace | None = None,
) -> LookupResult:
    """A hit on ``entry`` (served, or what a dry run would serve)."""
    return LookupResult(
        True,
        key,
        score=score,
        entry_id=entry.id,
        answer=entry.answer,
        cached_question=entry.question,
        expires_at=expires_at,
        embedding=vector,
        trace=trace,
        verifier_score=verifier_score,
    )


def decided_result(
    tr: LookupTrace,
    key: str,
    choice: Choice,
    best_score: float,
    vector: NDArray[np.float32],
    remaining: int,
    policy: SemanticPolicy,
) -> LookupResult:
    """The result of a dry run, or of a serving miss: nothing is written here."""
    if choice.served is not None:  # only a dry run gets here with an entry to serve
        entry, score = choice.served
        tr.served(entry.id)
        tr.step("validators", True)
        return hit_result(
            key,
            entry,
            score,
            vector,
            expires_at=served_expiry(entry, policy),  # a dry run slides nothing
            verifier_score=choice.verifier_score,
            trace=tr.result,
        )
    if choice.refused is not None:
        reason, entry_id = choice.refused
        tr.step("validators", False, reason)
        return LookupResult(
            False,
            key,
            reason=reason,
            score=best_score,
            entry_id=entry_id,
            embedding=vector,
            trace=tr.result,
            verifier_score=choice.verifier_score,
            verifier_unread=choice.verifier_unread,
        )
    # None cleared the bar, or every candidate had vanished and nothing is left.
    reason = EMPTY if remaining == 0 else BELOW_THRESHOLD
    return LookupResult(
        False, key, reason=reason, score=best_score, embedding=vector, trace=tr.result
    )
