"""Issue 14: the question-vector LRU is keyed per tenant, so one tenant cannot learn
from response times whether another tenant asked a question recently; and per
partition namespace, so neither can one end user of a tenant whose cache is scoped
per user learn it of another."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest
from numpy.typing import NDArray

from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.partition import SemanticQuery
from semantic.store import EntryStore
from tests.semantic.helpers import STORED, chat, reply

pytestmark = pytest.mark.slow


class CountingEmbedder:
    """The real embedder, counting the texts it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls = 0
        self.dim, self.embedder_id = inner.dim, inner.embedder_id

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += len(texts)
        return self.inner.embed(texts)


def test_question_vectors_are_not_shared_across_tenants(
    embedder: Embedder, store: EntryStore
) -> None:
    counting = CountingEmbedder(embedder)
    cache = SemanticCache(counting, store)
    for tenant in ("tenant-a", "tenant-b"):  # non-empty partitions: lookups embed
        assert cache.store(chat(STORED, tenant=tenant), reply()).stored
    after_store = counting.calls
    assert cache.lookup(chat(STORED, tenant="tenant-a")).hit
    assert counting.calls == after_store  # positive control: a tenant reuses its own vector
    cache.lookup(chat("A question only tenant a asked?", tenant="tenant-a"))
    asked = counting.calls
    cache.lookup(chat("A question only tenant a asked?", tenant="tenant-b"))
    assert counting.calls == asked + 1  # before: tenant b got tenant a's cached vector


def as_user(query: SemanticQuery, user: str) -> SemanticQuery:
    """``query`` in the tenant's partition for one end user (as the gateway names it
    under ``semantic_scope: user``)."""
    return replace(query, namespace=f'["tenant:{query.tenant}:0f", "user", "{user}"]')


def test_question_vectors_are_not_shared_across_users_of_a_user_scoped_tenant(
    embedder: Embedder, store: EntryStore
) -> None:
    counting = CountingEmbedder(embedder)
    cache = SemanticCache(counting, store)
    for user in ("alice", "bob"):  # non-empty partitions: lookups embed
        assert cache.store(as_user(chat(STORED), user), reply()).stored
    secret = chat("Can I see the layoff list for March?")
    cache.lookup(as_user(secret, "alice"))
    asked = counting.calls
    cache.lookup(as_user(secret, "alice"))
    assert counting.calls == asked  # positive control: a user reuses their own vector
    cache.lookup(as_user(secret, "bob"))
    assert counting.calls == asked + 1  # before: bob got alice's cached vector, at once


def test_a_swapped_embedder_keeps_vectors_only_when_it_is_the_same_model(
    embedder: Embedder, store: EntryStore
) -> None:
    counting = CountingEmbedder(embedder)
    cache = SemanticCache(counting, store)
    assert cache.store(chat(STORED), reply()).stored
    assert cache.vectors.cached("tenant-a", STORED) is not None
    wrapper = CountingEmbedder(embedder)  # e.g. the tracing wrapper: the same model
    cache.embedder = wrapper
    assert cache.vectors.cached("tenant-a", STORED) is not None  # positive control: kept
    other = CountingEmbedder(embedder)
    other.embedder_id = "another-model:384:0"
    cache.embedder = other
    assert cache.vectors.cached("tenant-a", STORED) is None  # never compared across models
