"""Per-tenant bounds on the semantic cache: entries and partitions (issue 14).

Checked by the backfill before an answer is stored, so no tenant grows the cache
without bound (every distinct answer-changing parameter set is a partition, so a
client sending odd body fields would otherwise mint partitions forever). What
happens at a bound is the tenant's policy (``semantic_limit_action``):

* ``evict_oldest`` (default): the oldest partitions (by their oldest entry) and then
  the oldest entries make room, and the new answer is stored;
* ``skip``: the new answer is not stored (``skipped:entry_limit`` /
  ``skipped:partition_limit``). Never a 4xx: the model has already answered.

Bounds are read from the database on each backfill (two small queries), so they hold
across gateway replicas up to the backfills that race each other.
"""

from __future__ import annotations

from gateway.policy import TenantPolicy
from semantic import SemanticCache

ENTRY_LIMIT = "entry_limit"
PARTITION_LIMIT = "partition_limit"


def make_room(
    cache: SemanticCache, tenant: str, partition_key: str, policy: TenantPolicy
) -> str | None:
    """Make room for one entry in ``partition_key``; the reason to skip it, or None."""
    sizes = cache.entries.partition_sizes(tenant)
    evict = policy.semantic_limit_action == "evict_oldest"
    if partition_key not in sizes and len(sizes) >= policy.max_semantic_partitions:
        if not evict:
            return PARTITION_LIMIT
        surplus = len(sizes) - policy.max_semantic_partitions + 1
        for key in sorted(sizes, key=lambda k: sizes[k][1])[:surplus]:
            cache.invalidate(partition_key=key, tenant=tenant)
            del sizes[key]
    entries = sum(n for n, _ in sizes.values())
    if entries >= policy.max_semantic_entries:
        if not evict:
            return ENTRY_LIMIT
        for entry_id in cache.entries.oldest_ids(tenant, entries - policy.max_semantic_entries + 1):
            cache.invalidate(entry_id=entry_id)
    return None
