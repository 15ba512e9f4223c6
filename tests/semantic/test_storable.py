"""``store_skip_reason`` (semantic/storable.py) gives the reason ``SemanticCache.store``
gives, for every kind of refusal, without writing anything: the backfill asks it before
it evicts to make room, so the two must never disagree (real embedder, real SQLite)."""

from __future__ import annotations

from typing import Any

import pytest

from semantic import SemanticCache, SemanticPolicy
from semantic.embedder import Embedder
from semantic.storable import store_skip_reason
from semantic.store import EntryStore
from tests.semantic.helpers import DigitValidator, ManualClock, chat, reply

ANY = SemanticPolicy()
GUARDED = SemanticPolicy(guards=("time_sensitive",))
RESET = "How do I reset my password?"
TOOL_CALL = reply() | {
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "x", "tool_calls": [{"id": "1"}]},
            "finish_reason": "stop",
        }
    ]
}


@pytest.fixture
def cache(embedder: Embedder, store: EntryStore, clock: ManualClock) -> SemanticCache:
    return SemanticCache(embedder, store, validator=DigitValidator(), clock=clock)


@pytest.mark.parametrize(
    ("question", "response", "policy", "reason"),
    [
        (RESET, reply(), ANY, None),
        (RESET, reply("Use the", "length"), ANY, "truncated"),
        (RESET, reply("No.", "content_filter"), ANY, "refused"),
        (RESET, {"error": {"message": "x"}}, ANY, "error"),
        (RESET, reply("  "), ANY, "empty"),
        (RESET, TOOL_CALL, ANY, "tool_calls"),
        ("What is the latest status?", reply(), GUARDED, "guarded:time_sensitive"),
        ("What is the latest status?", reply(), ANY, None),  # no guard in force
        ("你们几点开门几点关门", reply(), ANY, "unsupported_text"),
    ],
)
def test_the_reason_is_the_stores_and_nothing_is_written(
    cache: SemanticCache,
    question: str,
    response: dict[str, Any],
    policy: SemanticPolicy,
    reason: str | None,
) -> None:
    query = chat(question)
    assert store_skip_reason(cache, query, response, policy) == reason
    assert cache.entries.count() == 0  # asking stored nothing
    result = cache.store(query, response, policy)
    assert (result.stored, result.reason) == (reason is None, reason)
