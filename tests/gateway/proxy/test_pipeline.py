"""The pipeline's decisions (gateway/proxy/pipeline.py) over a real semantic cache: the
real embedder and validators, a real SQLite file. No HTTP, no language model."""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gateway.metrics import GatewayMetrics
from gateway.proxy import store_rest
from gateway.proxy.cacheable import unreplayable_request
from gateway.proxy.controls import CacheControl, request_policy
from gateway.proxy.pipeline import Pipeline
from gateway.settings import Settings
from semantic import Embedder, EntryStore, SemanticCache
from semantic.models import SemanticEntry
from tests.gateway.proxy.pipeline_support import (
    MODEL,
    answer,
    backfill,
    body,
    ctx,
    lookup,
    real_cache,
)
from validators import Validator


@pytest.mark.parametrize(
    ("header", "no_cache", "no_store"),
    [
        (None, False, False),
        ("", False, False),
        ("no-cache", True, False),
        ("No-Store", False, True),
        ("no-store, NO-CACHE", True, True),
        (" max-age=0 ,no-cache ", True, False),
        ("max-age=0", False, False),
        ('no-cache="set-cookie"', False, False),  # a field-scoped directive: not ours
        ("no-cacheable, no-stored", False, False),
    ],
)
def test_cache_control_parsing(header: str | None, no_cache: bool, no_store: bool) -> None:
    cc = CacheControl.parse(header)
    assert (cc.no_cache, cc.no_store) == (no_cache, no_store)


# ----------------------------------------------------------------- with the real cache


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "pipeline.db"


@pytest.fixture
def cache(embedder: Embedder, db_file: Path) -> Iterator[SemanticCache]:
    with real_cache(embedder, db_file) as semantic:
        yield semantic


def sample(metrics: GatewayMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.mark.slow
def test_skip_reasons_in_order(cache: SemanticCache) -> None:
    metrics = GatewayMetrics()
    q = body("What is the capital of France?")
    assert lookup(Pipeline(None, metrics), ctx(), q).header == "skipped:disabled"
    pipe = Pipeline(cache, metrics)
    assert lookup(pipe, ctx(semantic_enabled=False), q).header == "skipped:policy"
    assert lookup(pipe, ctx(), q, CacheControl(no_cache=True)).header == "skipped:no-cache"
    assert lookup(pipe, ctx(max_temperature=0.5), q | {"temperature": 0.7}).reason == "temperature"
    # No temperature means the API default, 1.0: above a 0.5 ceiling too.
    no_temp = {k: v for k, v in q.items() if k != "temperature"}
    assert lookup(pipe, ctx(max_temperature=0.5), no_temp).reason == "temperature"
    assert lookup(pipe, ctx(max_temperature=0.5), q | {"temperature": 0.5}).header == "miss:empty"
    assert lookup(pipe, ctx(), q | {"n": 2}).header == "skipped:n"
    assert lookup(pipe, ctx(mode="allowlist", allowlist_topics=["refund"]), q).header == (
        "skipped:not_allowlisted"
    )
    allowed = body("How long does a refund take?")
    assert lookup(pipe, ctx(mode="allowlist", allowlist_topics=["Refund"]), allowed).header == (
        "miss:empty"
    )
    no_user = q | {"messages": q["messages"][:1]}
    decision = lookup(pipe, ctx(), no_user)
    assert decision.status == "skipped" and decision.reason is not None
    assert decision.reason.startswith("uncacheable:")
    # A skipped request is never backfilled.
    assert backfill(pipe, ctx(), decision, answer("Paris.")) == "skipped:not_cacheable"
    assert sample(metrics, "cachegate_semantic_hits_total", tenant="acme") == 0
    assert cache.entries.count() == 0


@pytest.mark.slow
def test_backfill_outcomes_and_hits(cache: SemanticCache) -> None:
    metrics = GatewayMetrics()
    pipe = Pipeline(cache, metrics)
    q = body("What is the capital of France?")
    miss = lookup(pipe, ctx(), q)
    assert miss.header == "miss:empty" and miss.query is not None
    assert backfill(pipe, ctx(), miss, answer("Paris."), CacheControl(no_store=True)) == (
        "skipped:no-store"
    )
    assert backfill(pipe, ctx(store_enabled=False), miss, answer("Paris.")) == "skipped:policy"
    assert backfill(pipe, ctx(), miss, answer("Paris is", "length")) == "skipped:truncated"
    assert cache.entries.count() == 0
    assert lookup(pipe, ctx(), q).header == "miss:empty"

    assert backfill(pipe, ctx(), miss, answer("Paris.")) == "stored"
    hit = lookup(pipe, ctx(), body("Which city is the capital of France?"))
    assert hit.status == "hit" and hit.result is not None and hit.result.answer is not None
    assert hit.result.answer["choices"][0]["message"]["content"] == "Paris."
    assert hit.result.score is not None and hit.result.score >= 0.89
    # Other tenants, other parameters, a stricter threshold: no hit.
    assert lookup(pipe, ctx("other"), q).header == "miss:empty"
    assert lookup(pipe, ctx(), q | {"max_tokens": 33}).header == "miss:empty"
    strict = lookup(pipe, ctx(threshold=0.99), body("Which city is the capital of France?"))
    assert strict.header == "miss:below_threshold"

    assert sample(metrics, "cachegate_semantic_hits_total", tenant="acme") == 1
    assert sample(metrics, "cachegate_backfills_total", tenant="acme", result="stored") == 1
    # Only the cache's own refusals are counted (truncated); no-store and policy are not.
    assert sample(metrics, "cachegate_backfills_total", tenant="acme", result="skipped") == 1
    assert sample(metrics, "cachegate_semantic_misses_total", tenant="other", reason="empty") == 1


@pytest.mark.slow
def test_validator_refusals_and_guards_are_counted_by_kind(cache: SemanticCache) -> None:
    metrics = GatewayMetrics()
    pipe = Pipeline(cache, metrics)
    first = lookup(pipe, ctx(), body("Can I send 100 euros to Spain?"))
    assert backfill(pipe, ctx(), first, answer("Yes.")) == "stored"
    refused = lookup(pipe, ctx(), body("Can I send 900 euros to Spain?"))
    assert refused.header == "miss:entity_mismatch:amount"
    assert (
        sample(metrics, "cachegate_validator_rejections_total", tenant="acme", kind="amount") == 1
    )
    # A guarded scenario is refused before any search (and never stored).
    news = lookup(pipe, ctx(), body("What is the latest news today?"))
    assert news.header == "miss:guarded:time_sensitive"
    assert backfill(pipe, ctx(), news, answer("Nothing.")) == "skipped:guarded:time_sensitive"
    assert sample(metrics, "cachegate_semantic_misses_total", tenant="acme", reason="guarded") == 1
    # Without that guard in the policy the same question is an ordinary miss.
    unguarded = lookup(pipe, ctx("fresh", guards=[]), body("What is the latest news today?"))
    assert unguarded.header == "miss:empty"
    assert backfill(pipe, ctx("fresh", guards=[]), unguarded, answer("Nothing.")) == "stored"


@pytest.mark.slow
def test_store_outage_fails_open_and_recovers(
    cache: SemanticCache, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_rest, "STORE_RETRY_SECONDS", 0.5)
    metrics = GatewayMetrics()
    pipe = Pipeline(cache, metrics)
    q = body("What is the capital of France?")
    assert backfill(pipe, ctx(), lookup(pipe, ctx(), q), answer("Paris.")) == "stored"
    assert lookup(pipe, ctx(), q).status == "hit"
    assert asyncio.run(pipe.check_store()) is True
    other = body("Who wrote Romeo and Juliet?")
    early = lookup(pipe, ctx(), other)
    assert early.header == "miss:below_threshold"

    table = SemanticEntry.__tablename__
    with sqlite3.connect(db_file) as conn:  # the table goes away under the running cache
        conn.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    # The row the last hit read is still in the store's memo (semantic/entry_memo.py):
    # nothing can change it while the database is away, so it is served from memory.
    assert lookup(pipe, ctx(), q).status == "hit"
    cache.entries.memo.clear()  # as when its seconds are up: the read fails, fail open
    down = lookup(pipe, ctx(), q)
    assert down.header == "skipped:store_unavailable"
    assert pipe.store_ok is False
    # The layer rests: for STORE_RETRY_SECONDS nothing asks the store (a database that
    # hangs would cost every request its connect timeout), lookups and backfills alike.
    asked: list[str] = []
    original = cache.lookup

    def spy(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("local_only"):  # the memory path reads no database
            asked.append("lookup")
        return original(*args, **kwargs)

    monkeypatch.setattr(cache, "lookup", spy)
    unseen = body("How far away is the Moon?")  # a question kept in memory is decided there
    assert lookup(pipe, ctx(), unseen).header == "skipped:store_unavailable"
    assert backfill(pipe, ctx(), early, answer("Shakespeare.")) == "error:store_unavailable"
    assert asked == []
    time.sleep(0.6)
    # After the rest one request tries again. Nothing above the threshold: the index
    # alone answers, no DB read is needed; the backfill then finds the store still away.
    fresh = lookup(pipe, ctx(), unseen)
    assert fresh.header == "miss:below_threshold" and asked == ["lookup"]
    assert backfill(pipe, ctx(), fresh, answer("About 384,000 km.")) == "error:store_unavailable"
    assert metrics.registry.get_sample_value("cachegate_semantic_store_unavailable_total") == 4

    with sqlite3.connect(db_file) as conn:
        conn.execute(f"ALTER TABLE {table}_away RENAME TO {table}")
    assert asyncio.run(pipe.check_store()) is True  # /ready's ping ends the rest early
    back = lookup(pipe, ctx(), q)
    assert back.status == "hit" and pipe.store_ok is True
    assert backfill(pipe, ctx(), fresh, answer("About 384,000 km.")) == "stored"


@pytest.mark.slow
def test_a_decision_from_memory_does_not_end_the_rest(
    cache: SemanticCache, db_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A repeated question is decided from memory without the database: that says
    # nothing of the store, so the rest goes on and the next unseen question skips.
    pipe = Pipeline(cache, GatewayMetrics())
    q = body("What is the capital of France?")
    assert backfill(pipe, ctx(), lookup(pipe, ctx(), q), answer("Paris.")) == "stored"
    assert lookup(pipe, ctx(), q).status == "hit"
    table = SemanticEntry.__tablename__
    with sqlite3.connect(db_file) as conn:
        conn.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    cache.entries.memo.clear()
    assert lookup(pipe, ctx(), body("Who painted the Mona Lisa?")).status == "miss"  # index
    assert lookup(pipe, ctx(), q).header == "skipped:store_unavailable"  # the rest begins
    asked: list[str] = []
    original = cache.lookup

    def spy(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("local_only"):
            asked.append("lookup")
        return original(*args, **kwargs)

    monkeypatch.setattr(cache, "lookup", spy)
    memo_hit = lookup(pipe, ctx(), body("Who painted the Mona Lisa?"))
    assert memo_hit.status == "miss" and pipe.store_ok is False  # decided in memory
    unseen = lookup(pipe, ctx(), body("How far away is the Moon?"))
    assert unseen.header == "skipped:store_unavailable" and asked == []


@pytest.mark.slow
def test_check_store_follows_the_database(cache: SemanticCache, tmp_path: Path) -> None:
    pipe = Pipeline(cache, GatewayMetrics())
    assert asyncio.run(pipe.check_store()) is True
    assert asyncio.run(Pipeline(None, GatewayMetrics()).check_store()) is True
    # A store whose database cannot be opened at all (its directory does not exist).
    gone = SemanticCache(
        cache.embedder, EntryStore(f"sqlite:///{tmp_path / 'missing' / 'x.db'}"),
        validator=Validator(),
    )  # fmt: skip
    broken = Pipeline(gone, GatewayMetrics())
    assert asyncio.run(broken.check_store()) is False
    assert broken.store_ok is False
    (tmp_path / "missing").mkdir()
    assert asyncio.run(broken.check_store()) is True
    assert broken.store_ok is True
    gone.entries.close()


@pytest.mark.slow
def test_lookups_run_on_their_own_threads_with_the_callers_context(cache: SemanticCache) -> None:
    # Session 11: lookups left the default pool for one of their own (CACHEGATE_LOOKUP_THREADS).
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    seen: list[tuple[str, str]] = []
    original = cache.lookup

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append((threading.current_thread().name, marker.get()))
        return original(*args, **kwargs)

    # inline=False: an empty partition would otherwise be decided on the event loop
    pipe = Pipeline(cache, GatewayMetrics(), lookup_threads=1, inline=False)
    try:
        cache.lookup = recording  # type: ignore[method-assign]

        async def run() -> str:
            marker.set("request-7")  # e.g. the request's trace span
            decision = await pipe.lookup(
                ctx(), "chat", body("What is the capital of France?"), CacheControl()
            )
            return decision.header

        assert asyncio.run(run()).startswith("miss")
    finally:
        cache.lookup = original  # type: ignore[method-assign]
        pipe.close()
    assert len(seen) == 1
    thread, value = seen[0]
    assert thread.startswith("cachegate-lookup") and value == "request-7"
    with pytest.raises(ValueError, match="lookup_threads"):
        Pipeline(cache, GatewayMetrics(), lookup_threads=0)
    with pytest.raises(ValidationError):
        Settings(lookup_threads=0)
    assert Settings().lookup_threads == 2


@pytest.mark.slow
def test_a_repeated_question_is_decided_on_the_event_loop(cache: SemanticCache) -> None:
    # Session 13: a lookup that needs nothing but memory (its vector, rows and verdicts
    # kept) skips the thread hop; anything that would wait still goes to the threads.
    seen: list[tuple[str, bool]] = []
    original = cache.lookup

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append((threading.current_thread().name, bool(kwargs.get("local_only"))))
        return original(*args, **kwargs)

    metrics = GatewayMetrics()
    pipe = Pipeline(cache, metrics, lookup_threads=1)
    question, paraphrase = "What is the capital of France?", "Which city is the capital of France?"
    try:
        assert backfill(pipe, ctx(), lookup(pipe, ctx(), body(question)), answer("Paris.")) == (
            "stored"
        )
        cache.lookup = recording  # type: ignore[method-assign]
        first = lookup(pipe, ctx(), body(paraphrase))  # a new question: it must be embedded
        assert first.status == "hit"
        main, worker = seen
        assert main[1] and not main[0].startswith("cachegate-lookup")  # tried from memory
        assert worker[0].startswith("cachegate-lookup") and not worker[1]  # then in a thread
        seen.clear()
        again = lookup(pipe, ctx(), body(paraphrase))  # repeated: decided on the loop alone
        assert [local for _, local in seen] == [True]
        assert again.status == "hit" and again.result is not None and first.result is not None
        assert again.result.answer == first.result.answer
        assert again.result.score == first.result.score
        # Tenant isolation: another tenant's same text is never served acme's answer,
        # though acme's vector, row and verdicts are all in memory (positive control above).
        assert lookup(pipe, ctx("other"), body(paraphrase)).header == "miss:empty"
        assert sample(metrics, "cachegate_semantic_hits_total", tenant="acme") == 2
        # Where each lookup was decided: the new paraphrase in a thread; from memory the
        # repeat and the two asks of an empty partition (nothing to search or embed).
        assert sample(metrics, "cachegate_semantic_lookups_total", path="thread") == 1
        assert sample(metrics, "cachegate_semantic_lookups_total", path="memory") == 3
        # inline=False: every lookup goes to a thread
        seen.clear()
        threaded = Pipeline(cache, metrics, lookup_threads=1, inline=False)
        assert lookup(threaded, ctx(), body(paraphrase)).status == "hit"
        assert [local for _, local in seen] == [False]
        assert sample(metrics, "cachegate_semantic_lookups_total", path="thread") == 2
        threaded.close()
    finally:
        cache.lookup = original  # type: ignore[method-assign]
        pipe.close()
    assert Settings().lookup_inline is True


def test_a_completion_echoing_its_prompt_is_not_replayed() -> None:
    # A paraphrased prompt's hit would echo the cached prompt, not the client's own.
    prompt = {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 4}
    assert unreplayable_request(prompt | {"echo": True}) == "echo"
    assert unreplayable_request(prompt | {"echo": False}) is None  # control
    assert unreplayable_request(prompt) is None
    # logprobs 0 (== False) asks for the sampled tokens' logprobs; a suffix is not keyed
    assert unreplayable_request(prompt | {"logprobs": 0}) == "logprobs"
    assert unreplayable_request(prompt | {"suffix": " end."}) == "suffix"


def test_an_assistant_refusal_part_is_text_not_media() -> None:
    refused = {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]}
    turns = [{"role": "user", "content": "Q1"}, refused, {"role": "user", "content": "Q2"}]
    assert unreplayable_request({"model": MODEL, "messages": turns}) is None
    video = {"type": "video_url", "video_url": {"url": "http://media.example/v.mp4"}}
    turns[0] = {"role": "user", "content": [video]}
    assert unreplayable_request({"model": MODEL, "messages": turns}) == "video"  # control


def test_the_lookup_bounds_age_by_the_tenants_ttl_not_the_clients() -> None:
    # The client's cache.ttl shortens the life of its own answer; what a lookup may
    # serve is bounded by the tenant's TTL (a lowered one applies to older entries).
    tenant, client = ctx(ttl_seconds=3600), CacheControl(ttl=60, max_age=30)
    stored, looked = request_policy(tenant, client), request_policy(tenant, client, lookup=True)
    assert (stored.ttl_seconds, looked.ttl_seconds) == (60, 3600)
    assert stored.max_age_seconds == looked.max_age_seconds == 30


@pytest.mark.slow
def test_answers_of_replaced_weights_are_never_served(cache: SemanticCache) -> None:
    # The same model name over new weights (seed 003: the key holds the model version).
    metrics, q = GatewayMetrics(), body("What is the capital of France?")
    old = Pipeline(cache, metrics, model_revisions={MODEL: "weights-a"})
    assert backfill(old, ctx(), lookup(old, ctx(), q), answer("Paris.")) == "stored"
    assert lookup(old, ctx(), q).status == "hit"  # control: the same weights hit
    new = Pipeline(cache, metrics, model_revisions={MODEL: "weights-b"})
    assert lookup(new, ctx(), q).header == "miss:empty"
    unversioned = Pipeline(cache, metrics)
    assert lookup(unversioned, ctx(), q).header == "miss:empty"
    other = Pipeline(cache, metrics, model_revisions={"another-model": "weights-b"})
    assert lookup(other, ctx(), q).header == "miss:empty"  # MODEL has no revision here
