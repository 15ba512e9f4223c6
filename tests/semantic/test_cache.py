from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from semantic import rebuild as rebuild_module
from semantic.cache import SemanticCache
from semantic.embedder import Embedder
from semantic.errors import (
    EntryNotFoundError,
    InvalidQuestionError,
    InvalidRequestError,
    InvalidVectorError,
)
from semantic.hit_validator import HitValidator
from semantic.partition import SemanticQuery
from semantic.policy import DEFAULT_THRESHOLD, SemanticPolicy
from semantic.question import MAX_QUESTION_CHARS
from semantic.store import EntryStore
from tests.semantic.helpers import PARAPHRASE, STORED, DigitValidator, ManualClock, chat, reply


@pytest.fixture
def cache(embedder: Embedder, store: EntryStore, clock: ManualClock) -> SemanticCache:
    return SemanticCache(embedder, store, clock=clock)


def rows(cache: SemanticCache) -> tuple[int, int]:
    """(rows in the database, vectors in the index): both must agree after every call."""
    return cache.entries.count(), len(cache.index)


# -- partition isolation -----------------------------------------------------------
def test_paraphrase_hits_in_the_same_partition(cache: SemanticCache) -> None:
    stored = cache.store(chat(STORED), reply())
    assert stored.stored and stored.created
    result = cache.lookup(chat(PARAPHRASE))
    assert result.hit and result.reason is None
    assert result.entry_id == stored.entry_id
    assert result.score is not None and result.score > 0.95
    assert result.answer == reply()
    assert result.cached_question == STORED
    # Fields that cannot change the answer do not split the partition.
    assert cache.lookup(chat(PARAPHRASE, user="alice", stream=True)).hit


@pytest.mark.parametrize(
    "query",
    [
        pytest.param(chat(PARAPHRASE, tenant="tenant-b"), id="other-tenant"),
        pytest.param(chat(PARAPHRASE, model="other-model"), id="other-model"),
        pytest.param(chat(PARAPHRASE, temperature=0.7), id="other-temperature"),
        pytest.param(chat(PARAPHRASE, max_tokens=256), id="other-max-tokens"),
        pytest.param(chat(PARAPHRASE, system="You are a pirate."), id="other-system-prompt"),
        pytest.param(
            chat(
                PARAPHRASE,
                history=[
                    {"role": "user", "content": "I use the mobile app."},
                    {"role": "assistant", "content": "Got it."},
                ],
            ),
            id="other-earlier-turns",
        ),
    ],
)
def test_other_partitions_miss_as_empty(cache: SemanticCache, query: SemanticQuery) -> None:
    cache.store(chat(STORED), reply())
    assert cache.lookup(chat(PARAPHRASE)).hit  # positive control
    result = cache.lookup(query)
    assert (result.hit, result.reason) == (False, "empty")


def test_other_embedder_never_sees_these_vectors(
    cache: SemanticCache, other_embedder: Embedder, store: EntryStore, clock: ManualClock
) -> None:
    cache.store(chat(STORED), reply())
    # Even sharing the very same index object, the embedder id is in the partition key.
    shared = SemanticCache(other_embedder, store, cache.index, clock=clock)
    assert shared.lookup(chat(PARAPHRASE)).reason == "empty"
    # And a restart with the other embedder loads none of these entries.
    fresh = SemanticCache(other_embedder, store, clock=clock)
    assert fresh.rebuild(progress=False) == 0
    assert fresh.lookup(chat(PARAPHRASE)).reason == "empty"
    assert cache.lookup(chat(PARAPHRASE)).hit  # positive control


def test_a_tenant_prefix_in_the_text_would_not_isolate(embedder: Embedder) -> None:
    """The known failure the hard partition avoids: prefixes barely move the vector."""
    a, b = embedder.embed([f"tenant A: {STORED}", f"tenant B: {STORED}"])
    assert float(a @ b) >= DEFAULT_THRESHOLD  # would have served tenant A's answer to B


def test_below_threshold(cache: SemanticCache) -> None:
    cache.store(chat(STORED), reply())
    result = cache.lookup(chat("What is the weather in Paris tomorrow?"))
    assert (result.hit, result.reason) == (False, "below_threshold")
    assert result.score is not None and result.score < DEFAULT_THRESHOLD
    strict = cache.lookup(chat(PARAPHRASE), SemanticPolicy(threshold=0.999))
    assert strict.reason == "below_threshold"
    # 1.0 means "the same question only": float32 rounding must not make it "never".
    identical = SemanticPolicy(threshold=1.0)
    assert cache.lookup(chat(STORED), identical).hit
    assert cache.lookup(chat(PARAPHRASE), identical).reason == "below_threshold"


def test_completions_endpoint(cache: SemanticCache) -> None:
    def completion(prompt: str) -> SemanticQuery:
        return SemanticQuery.from_completion(
            tenant="tenant-a", body={"model": "smollm2-135m", "prompt": prompt}
        )

    body = {"choices": [{"index": 0, "text": "Use the link.", "finish_reason": "stop"}]}
    assert cache.store(completion(STORED), body).stored
    assert cache.lookup(completion(PARAPHRASE)).answer == body
    assert cache.lookup(chat(PARAPHRASE)).reason == "empty"  # chat is another partition


def test_hits_are_counted(cache: SemanticCache, clock: ManualClock) -> None:
    entry_id = cache.store(chat(STORED), reply()).entry_id
    assert entry_id is not None
    clock.advance(5)
    cache.lookup(chat(PARAPHRASE))
    cache.lookup(chat(STORED))
    entry = cache.get_entry(entry_id)
    assert entry.hit_count == 2 and entry.last_hit_at == clock.now
    with pytest.raises(EntryNotFoundError):
        cache.get_entry(entry_id + 1000)


def test_a_rebuild_keeps_serving_until_it_swaps_the_new_partitions_in(
    cache: SemanticCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rebuild while serving (the change feed's, after a long outage) used to clear the
    # index first: every lookup missed until the whole table was read again.
    cache.store(chat(STORED), reply())
    during: list[bool] = []
    read = cache.entries.iter_entries

    def watched(**kwargs: Any) -> Iterator[Any]:
        for entry in read(**kwargs):
            during.append(cache.lookup(chat(PARAPHRASE)).hit)  # while the rebuild reads
            yield entry

    monkeypatch.setattr(cache.entries, "iter_entries", watched)
    assert cache.rebuild(progress=False) == 1
    assert during == [True]
    assert cache.lookup(chat(PARAPHRASE)).hit  # and from the new partitions after


def test_a_rebuild_without_a_bar_logs_its_progress(
    cache: SemanticCache, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The change feed's rebuild runs in a background thread, without a progress bar: at
    # a million rows it takes minutes, so log lines say it started and how far it is.
    cache.store(chat(STORED), reply())
    cache.store(chat("How do I close my account?"), reply("Use the settings page."))
    monkeypatch.setattr(rebuild_module, "PROGRESS_LOG_SECONDS", 0.0)
    with caplog.at_level(logging.INFO, logger="semantic.rebuild"):
        assert cache.rebuild(progress=False) == 2
    lines = [r.getMessage() for r in caplog.records if r.name == "semantic.rebuild"]
    assert lines[0] == "semantic index: rebuilding from 2 entries"
    assert "semantic index: 1 of 2 entries read" in lines
    assert lines[-1].startswith("semantic index: 2 entries indexed in ")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="semantic.rebuild"):
        assert cache.rebuild(progress=True) == 2  # the bar says it instead (tqdm, stderr)
    assert not [r for r in caplog.records if r.name == "semantic.rebuild"]


# -- backfill ----------------------------------------------------------------------
def test_backfill_is_idempotent(cache: SemanticCache) -> None:
    first = cache.store(chat(STORED), reply("old answer"))
    second = cache.store(chat("how do I reset my password"), reply("new answer"))
    assert first.created and not second.created
    assert second.entry_id == first.entry_id
    assert rows(cache) == (1, 1)
    assert cache.lookup(chat(PARAPHRASE)).answer == reply("new answer")


def test_store_reuses_the_lookup_embedding(cache: SemanticCache) -> None:
    cache.store(chat("How do I close my account?"), reply("Settings."))
    miss = cache.lookup(chat(STORED))
    assert not miss.hit and miss.embedding is not None
    assert cache.store(chat(STORED), reply(), embedding=miss.embedding).stored
    assert cache.lookup(chat(PARAPHRASE)).hit


def _with_choice(**changes: Any) -> dict[str, Any]:
    body = reply()
    body["choices"][0].update(changes)
    return body


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (reply(finish="length"), "truncated"),
        (reply(finish="content_filter"), "refused"),
        (
            _with_choice(message={"role": "assistant", "content": "", "refusal": "I can't."}),
            "refused",
        ),
        ({"error": {"message": "upstream failed", "type": "server_error"}}, "error"),
        (reply(text="   "), "empty"),
        ({"choices": []}, "empty"),
        (
            _with_choice(
                message={"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
                finish_reason="tool_calls",
            ),
            "finish_reason:tool_calls",
        ),
        (
            {"choices": [*reply()["choices"], *reply(finish="length")["choices"]]},
            "truncated",
        ),
    ],
)
def test_never_stores_unusable_answers(
    cache: SemanticCache, response: dict[str, Any], reason: str
) -> None:
    result = cache.store(chat(STORED), response)
    assert (result.stored, result.reason, result.entry_id) == (False, reason, None)
    assert rows(cache) == (0, 0)
    assert cache.store(chat(STORED), reply()).stored  # positive control


# -- invalidation ------------------------------------------------------------------
def test_invalidate_by_entry_partition_and_tenant(cache: SemanticCache) -> None:
    a1 = cache.store(chat(STORED), reply())
    cache.store(chat("How do I close my account?"), reply("Settings."))
    pirate = cache.store(chat(STORED, system="You are a pirate."), reply("Arr."))
    cache.store(chat(STORED, tenant="tenant-b"), reply("B's answer"))
    assert rows(cache) == (4, 4)

    assert a1.entry_id is not None
    assert cache.invalidate(entry_id=a1.entry_id) == 1
    assert cache.invalidate(entry_id=a1.entry_id) == 0
    assert not cache.lookup(chat(PARAPHRASE)).hit
    assert cache.lookup(chat("How can I close my account?")).hit  # same partition, kept

    assert cache.invalidate(partition_key=pirate.partition_key) == 1
    assert cache.lookup(chat(PARAPHRASE, system="You are a pirate.")).reason == "empty"

    assert cache.invalidate(tenant="tenant-b") == 1
    assert cache.lookup(chat(PARAPHRASE, tenant="tenant-b")).reason == "empty"
    assert rows(cache) == (1, 1)

    with pytest.raises(ValueError):
        cache.invalidate()
    with pytest.raises(ValueError):
        cache.invalidate(entry_id=1, tenant="tenant-a")


# -- restart -----------------------------------------------------------------------
def test_entries_survive_a_restart(
    cache: SemanticCache, embedder: Embedder, sqlite_url: str, clock: ManualClock
) -> None:
    kept = cache.store(chat(STORED), reply())
    cache.store(chat("How do I close my account?"), reply(), SemanticPolicy(ttl_seconds=30))
    clock.advance(31)

    reopened = EntryStore(sqlite_url)
    restarted = SemanticCache(embedder, reopened, clock=clock)
    assert restarted.lookup(chat(PARAPHRASE)).reason == "empty"  # nothing loaded yet
    assert restarted.rebuild(progress=False) == 1  # the expired entry is purged instead
    result = restarted.lookup(chat(PARAPHRASE))
    assert result.hit and result.entry_id == kept.entry_id
    reopened.close()


# -- validators --------------------------------------------------------------------
@pytest.fixture
def validated(embedder: Embedder, store: EntryStore, clock: ManualClock) -> SemanticCache:
    validator = DigitValidator()
    assert isinstance(validator, HitValidator)
    return SemanticCache(embedder, store, validator=validator, clock=clock)


def test_validator_refuses_a_number_mismatch(validated: SemanticCache) -> None:
    first = validated.store(chat("What is the status of order 12345?"), reply("Shipped."))
    query = chat("What is the status of order 12346?")
    result = validated.lookup(query)
    assert (result.hit, result.reason) == (False, "entity_mismatch:number")
    assert result.entry_id == first.entry_id
    # Positive control: the similarity alone would have served the wrong answer.
    assert result.score is not None and result.score >= DEFAULT_THRESHOLD
    unvalidated = SemanticCache(validated.embedder, validated.entries, validated.index)
    assert unvalidated.lookup(query).hit
    # The policy decides which kinds are compared.
    assert validated.lookup(query, SemanticPolicy(entity_kinds=("date",))).hit
    assert validated.get_entry(first.entry_id or 0).entities == {"number": ["12345"]}


def test_a_refused_top_candidate_does_not_hide_a_good_second(validated: SemanticCache) -> None:
    validated.store(chat("What is the status of order 12345?"), reply("Shipped."))
    second = validated.store(chat("Status of order 12346"), reply("Delayed."))
    result = validated.lookup(chat("What is the status of order 12346?"))
    assert result.hit and result.entry_id == second.entry_id
    assert result.answer == reply("Delayed.")


def test_guards_apply_to_lookup_and_store(validated: SemanticCache) -> None:
    guarded = SemanticPolicy(guards=("time_sensitive",))
    question = chat("What is the latest status of order 12345?")
    skipped = validated.store(question, reply(), guarded)
    assert (skipped.stored, skipped.reason) == (False, "guarded:time_sensitive")
    assert rows(validated) == (0, 0)
    assert validated.store(question, reply()).stored  # positive control: no guard, stored
    assert validated.lookup(question).hit
    assert validated.lookup(question, guarded).reason == "guarded:time_sensitive"


# -- bad input ---------------------------------------------------------------------
def test_bad_questions_are_typed_errors_and_change_nothing(cache: SemanticCache) -> None:
    cache.store(chat(STORED), reply())
    before = rows(cache)
    for bad in ["", "   ", "x" * (MAX_QUESTION_CHARS + 1), b"order \xff\xfe", "bad \udc80"]:
        with pytest.raises(InvalidQuestionError):
            SemanticQuery(tenant="tenant-a", model="m", question=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidQuestionError):
            chat(bad)  # type: ignore[arg-type]
    too_many_tokens = chat("please explain the refund policy " * 60)
    with pytest.raises(InvalidQuestionError, match="tokens"):
        cache.store(too_many_tokens, reply())
    with pytest.raises(InvalidQuestionError, match="tokens"):
        cache.lookup(too_many_tokens)
    assert rows(cache) == before


@pytest.mark.parametrize(
    "embedding",
    [np.full(384, np.nan), np.full(384, np.inf), np.zeros(384), np.ones(383), np.ones((2, 384))],
)
def test_bad_vectors_are_typed_errors_and_change_nothing(
    cache: SemanticCache, embedding: np.ndarray
) -> None:
    cache.store(chat(STORED), reply())
    before = rows(cache)
    with pytest.raises((InvalidVectorError, InvalidRequestError)):
        cache.store(chat("How do I close my account?"), reply(), embedding=embedding)
    assert rows(cache) == before


def test_non_json_responses_are_refused_before_writing(cache: SemanticCache) -> None:
    body = reply()
    body["usage"]["weird"] = float("nan")
    with pytest.raises(InvalidRequestError, match="JSON"):
        cache.store(chat(STORED), body)
    assert rows(cache) == (0, 0)


# -- concurrency -------------------------------------------------------------------
def test_concurrent_stores_and_lookups(cache: SemanticCache) -> None:
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(4):
                question = f"What is the shipping time to zone {worker * 10 + i}?"
                cache.store(chat(question), reply())
                cache.store(chat(question), reply())  # idempotent under contention too
                cache.lookup(chat(question))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert rows(cache) == (16, 16)
