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
one. Bounds are read from the database on each backfill (two small queries), and the
caller holds the cache's write lock from here through the store, so within one
gateway the bounds hold exactly; across replicas, up to the backfills that race.
"""

from __future__ import annotations

from datetime import datetime

from gateway.policy import TenantPolicy
from semantic import SemanticCache

ENTRY_LIMIT = "entry_limit"
PARTITION_LIMIT = "partition_limit"
#: The most entries (and partitions) one backfill evicts, under the cache's write lock:
#: a bound lowered far below what a tenant holds is reached over several backfills,
#: each skipping its own answer until there is room (deleting 100,000 entries one
#: transaction each held every tenant's stores for ~14 min on PostgreSQL; a review).
MAX_EVICTIONS = 500
MAX_PARTITION_EVICTIONS = 50


def make_room(
    cache: SemanticCache,
    tenant: str,
    partition_key: str,
    policy: TenantPolicy,
    question: str | None = None,
) -> str | None:
    """Make room for one entry in ``partition_key``; the reason to skip it, or None.
    A ``question`` the partition already holds needs none: storing it is an update."""
    sizes = cache.entries.partition_sizes(tenant)
    if not _at_a_bound(sizes, partition_key, policy):
        return None
    if question is not None and cache.entries.has_question(partition_key, question):
        return None
    if cache.purge_expired(tenant):
        sizes = cache.entries.partition_sizes(tenant)  # what is left counts
    evict = policy.semantic_limit_action == "evict_oldest"
    if partition_key not in sizes and len(sizes) >= policy.max_semantic_partitions:
        if not evict:
            return PARTITION_LIMIT
        surplus = len(sizes) - policy.max_semantic_partitions + 1
        for key in sorted(sizes, key=lambda k: sizes[k][1])[
            : min(surplus, MAX_PARTITION_EVICTIONS)
        ]:
            cache.invalidate(partition_key=key, tenant=tenant)
            del sizes[key]
        if surplus > MAX_PARTITION_EVICTIONS:
            return PARTITION_LIMIT  # more room at the next backfills
    entries = sum(n for n, _ in sizes.values())
    if entries >= policy.max_semantic_entries:
        if not evict:
            return ENTRY_LIMIT
        surplus = entries - policy.max_semantic_entries + 1
        oldest = cache.entries.oldest_ids(tenant, min(surplus, MAX_EVICTIONS))
        cache.invalidate(entry_id=oldest)  # one transaction
        if surplus > MAX_EVICTIONS:
            return ENTRY_LIMIT
    return None


def _at_a_bound(
    sizes: dict[str, tuple[int, datetime]], partition_key: str, policy: TenantPolicy
) -> bool:
    new_partition = partition_key not in sizes
    return (new_partition and len(sizes) >= policy.max_semantic_partitions) or sum(
        n for n, _ in sizes.values()
    ) >= policy.max_semantic_entries
