"""Per-tenant bounds on the semantic cache: entries and partitions (issue 14).

Checked by the backfill before an answer is stored, so no tenant grows the cache
without bound (every distinct answer-changing parameter set is a partition, so a
client sending odd body fields would otherwise mint partitions forever). What
happens at a bound is the tenant's policy (``semantic_limit_action``):

* ``evict_oldest`` (default): the least recently used partitions (by their latest
  write or hit) and then the least recently used entries make room, and the new
  answer is stored;
* ``skip``: the new answer is not stored (``skipped:entry_limit`` /
  ``skipped:partition_limit``). Never a 4xx: the model has already answered.

Expired entries do not count: at a bound they are purged first (nothing else removes
them while serving but a lookup that meets one), so a tenant whose entries all expired
is never stuck at ``skipped:entry_limit``, and an expired entry never outlives a live
one. Bounds are read from the database on each backfill, from the partition counts
triggers keep (``semantic/store_sizes.py``, migration 0015: one row a partition; the
GROUP BY over the tenant's entries that it replaced took 50-120 ms at 100,000 entries,
under the write lock every tenant's backfills share), and the caller holds the cache's
write lock from here through the store, so within one gateway the bounds hold exactly;
across replicas, up to the backfills that race. An eviction frees 1% of the bound at
once (at most 500 entries, 50 partitions), so a tenant kept at its bound pays the
ordered read of what was least recently used once every few hundred backfills.
"""

from __future__ import annotations

import math

from gateway.policy import TenantPolicy
from semantic import SemanticCache
from semantic.store_sizes import TenantSize

ENTRY_LIMIT = "entry_limit"
PARTITION_LIMIT = "partition_limit"
#: The most entries (and partitions) one backfill evicts, under the cache's write lock:
#: a bound lowered far below what a tenant holds is reached over several backfills,
#: each skipping its own answer until there is room (deleting 100,000 entries one
#: transaction each held every tenant's stores for ~14 min on PostgreSQL; a review).
MAX_EVICTIONS = 500
MAX_PARTITION_EVICTIONS = 50
#: The share of a bound one eviction frees (at most the two caps above): at 100,000
#: entries, 500 go at once, and the tenant holds 99.5-100% of its bound.
EVICT_SHARE = 0.01


def make_room(
    cache: SemanticCache,
    tenant: str,
    partition_key: str,
    policy: TenantPolicy,
    question: str | None = None,
) -> str | None:
    """Make room for one entry in ``partition_key``; the reason to skip it, or None.
    A ``question`` the partition already holds needs none: storing it is an update."""
    size = cache.entries.tenant_size(tenant, partition_key)  # the triggers' counts
    if not _at_a_bound(size, policy):
        return None
    if question is not None and cache.entries.has_question(partition_key, question):
        return None
    if cache.purge_expired(tenant):
        size = cache.entries.tenant_size(tenant, partition_key)  # what is left counts
    evict = policy.semantic_limit_action == "evict_oldest"
    entries = size.entries
    if not size.has_partition and size.partitions >= policy.max_semantic_partitions:
        if not evict:
            return PARTITION_LIMIT
        sizes = cache.entries.partition_sizes(tenant)  # their last use: here only
        surplus = len(sizes) - policy.max_semantic_partitions + 1
        batch = max(surplus, _headroom(policy.max_semantic_partitions))
        for key in sorted(sizes, key=lambda k: sizes[k][1])[: min(batch, MAX_PARTITION_EVICTIONS)]:
            cache.invalidate(partition_key=key, tenant=tenant)
            entries -= sizes.pop(key)[0]
        if surplus > MAX_PARTITION_EVICTIONS:
            return PARTITION_LIMIT  # more room at the next backfills
    if entries >= policy.max_semantic_entries:
        if not evict:
            return ENTRY_LIMIT
        surplus = entries - policy.max_semantic_entries + 1
        batch = max(surplus, _headroom(policy.max_semantic_entries))
        oldest = cache.entries.oldest_ids(tenant, min(batch, MAX_EVICTIONS))
        cache.invalidate(entry_id=oldest)  # one transaction
        if surplus > MAX_EVICTIONS:
            return ENTRY_LIMIT
    return None


def _headroom(bound: int) -> int:
    """What one eviction frees beyond the one entry (or partition) it makes room for:
    a tenant at its bound would otherwise pay the eviction's ordered read at every
    backfill (50 ms at 100,000 entries, under the write lock every tenant shares);
    a share of the bound pays it once every few hundred."""
    return max(1, math.ceil(bound * EVICT_SHARE))


def _at_a_bound(size: TenantSize, policy: TenantPolicy) -> bool:
    new_partition = not size.has_partition
    return (
        new_partition and size.partitions >= policy.max_semantic_partitions
    ) or size.entries >= policy.max_semantic_entries
