"""Whether :meth:`SemanticCache.store` would keep an answer, decided before anything moves.

The backfill makes room under a tenant's bounds (``gateway/proxy/semantic_limits.py``:
the oldest partitions and entries are evicted) before it stores. An answer the store
then refuses (truncated, refused, an error, a guarded or unsupported question) would
have evicted good entries for nothing; the backfill asks this first, and makes room
only for an answer that will be stored.

``SemanticCache.store`` decides with this same function, so the reason is the one the
store gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from semantic.cacheability import uncacheable_reason
from semantic.partition import SemanticQuery
from semantic.policy import SemanticPolicy
from semantic.question_vectors import memo_scope
from semantic.results import UNSUPPORTED_TEXT

if TYPE_CHECKING:
    from semantic.cache import SemanticCache


def store_skip_reason(
    cache: SemanticCache, query: SemanticQuery, response: Mapping[str, Any], policy: SemanticPolicy
) -> str | None:
    """Why ``cache.store(query, response, policy)`` would not store; None if it would.

    No database and no embedding: the response is only read, and the question's coverage
    is the one its lookup already computed (kept per partition namespace and question).
    """
    skip = uncacheable_reason(response, query.endpoint)
    if skip is None and cache.validator is not None and policy.guards:
        # through the lookup's memo: the backfill and the store ask this in turn
        scope = memo_scope(query)
        guard = partial(cache.validator.guard, query.question, policy.guards, scope=scope)
        guards = (str(id(cache.validator)), *policy.guards)
        skip = cache.vectors.guarded(scope, query.question, guards, guard)
    if skip is None and not cache.is_supported(query.question, memo_scope(query)):
        skip = UNSUPPORTED_TEXT
    return skip
