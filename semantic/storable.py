"""Whether :meth:`SemanticCache.store` would keep an answer, decided before anything moves.

The backfill makes room under a tenant's bounds (``gateway/proxy/semantic_limits.py``:
the oldest partitions and entries are evicted) before it stores. An answer the store
then refuses (truncated, refused, an error, a guarded or unsupported question) would
have evicted good entries for nothing; the backfill asks this first, and makes room
only for an answer that will be stored.

``SemanticCache.store`` decides with this same function, so the reason is the one the
store gives, and builds the row it writes with :func:`new_entry`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from numpy.typing import ArrayLike

from semantic.cacheability import uncacheable_reason
from semantic.entries import NewEntry
from semantic.errors import InvalidRequestError
from semantic.index import check_vectors
from semantic.json_copy import json_copy
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


def new_entry(
    cache: SemanticCache,
    query: SemanticQuery,
    response: Mapping[str, Any],
    policy: SemanticPolicy,
    key: str,
    embedding: ArrayLike | None,
) -> tuple[NewEntry, datetime]:
    """The row ``cache.store`` writes, every field validated before the database is
    touched: the question's vector (``embedding`` from its lookup, else embedded now), a
    JSON copy of the answer and of the question's entities, and its expiry; with the
    time it was made (read after the embedding, which may take a while)."""
    if embedding is None:
        vector = cache.vectors.vector(memo_scope(query), query.question)
    else:
        vectors = check_vectors(embedding, cache.embedder.dim)
        if vectors.shape[0] != 1:
            raise InvalidRequestError("store() takes one embedding")
        vector = vectors[0]
    answer = json_copy(dict(response), "response body")
    entities = None
    if cache.validator is not None:
        extracted = cache.validator.extract(query.question, scope=memo_scope(query))
        entities = json_copy(extracted, "entities")
    now = cache.now()
    ttl = policy.ttl_seconds
    new = NewEntry(
        partition_key=key,
        tenant=query.tenant,
        question=query.question,
        answer=answer,
        embedding=vector,
        embedder_id=cache.embedder_id,
        entities=entities,
        expires_at=now + timedelta(seconds=ttl) if ttl else None,
        ttl_seconds=ttl,
    )
    return new, now
