"""Counting a served entry's hit, and what expiry the hit is served with.

A hit is counted in memory and written in batches (:class:`~semantic.hit_counter.
HitCounter`) unless it slides the entry's expiry (a policy with ``sliding_ttl``) or
no counter is configured: then it is written at once, because the next lookup (here
or on another replica) must not find the entry expired by its old expiry, nor by the
policy's sliding TTL counted from its old last hit.
"""

from __future__ import annotations

import logging
from datetime import datetime

from semantic.candidates import served_expiry, slid_expiry
from semantic.errors import StoreUnavailableError
from semantic.hit_counter import HitCounter
from semantic.policy import SemanticPolicy
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
